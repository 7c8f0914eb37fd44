"""Fixtures shared by the integration tests."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from .cluster import cluster

__all__ = ["cluster", "frozen_gc"]


@pytest.fixture
def frozen_gc() -> Iterator[None]:
    """Leave the objects of every earlier test in this process out of garbage collection for
    the test: a latency measured in the test process then includes the client's own
    collections, not a full collection over the whole test session's heap."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
