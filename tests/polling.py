"""Waiting for a condition in synchronous tests: poll with a deadline, never sleep-and-hope.
(Async tests use ``tests.integration.wire_client.eventually``.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None], timeout_s: float = 30.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy (deadline, short pauses)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {timeout_s} s"
        time.sleep(0.05)
