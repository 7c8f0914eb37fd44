"""Waiting for a condition in tests: poll with a deadline, never sleep-and-hope.

Tests wait for a condition with :func:`eventually` (synchronous) or :func:`eventually_async`
(in a running event loop), so that a wait fails the same way everywhere: an ``AssertionError``
naming what was awaited and for how long, followed by whatever the caller's ``detail`` adds (a
log tail, an object's status) at the moment the deadline passed.

An exception raised by ``probe`` or ``check`` ends the wait at once and propagates unchanged: a
probe that breaks is a failure of the test, not a condition that is not met yet.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")


def _failure(what: str, timeout_s: float, detail: Callable[[], str] | None) -> AssertionError:
    """The error of a wait that ran out; ``detail`` is called now, when it describes the state
    the wait ended in rather than the state it started in."""
    message = f"{what}: not reached within {round(timeout_s, 3):g} s"
    if detail is not None:
        message += f"\n{detail()}"
    return AssertionError(message)


def eventually(
    probe: Callable[[], T | None],
    timeout_s: float = 30.0,
    what: str = "condition",
    *,
    interval_s: float = 0.05,
    check: Callable[[], object] | None = None,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` every ``interval_s`` until it returns something truthy and return that.

    ``check``, when given, runs after each falsy probe and raises to end the wait early (a
    process the condition depends on has exited, say). When ``timeout_s`` has passed, raises
    ``AssertionError`` naming ``what`` and the timeout, with ``detail()`` appended. The 30 s
    default suits the tiers that use this one: API servers, subprocesses and Spark, which take
    seconds to react."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s, detail)
        time.sleep(interval_s)


@overload
async def eventually_async(
    probe: Callable[[], Awaitable[T | None]],
    timeout_s: float = 10.0,
    what: str = "condition",
    *,
    interval_s: float = 0.02,
    check: Callable[[], object] | None = None,
    detail: Callable[[], str] | None = None,
) -> T: ...


@overload
async def eventually_async(
    probe: Callable[[], T | None],
    timeout_s: float = 10.0,
    what: str = "condition",
    *,
    interval_s: float = 0.02,
    check: Callable[[], object] | None = None,
    detail: Callable[[], str] | None = None,
) -> T: ...


async def eventually_async(
    probe: Callable[[], object],
    timeout_s: float = 10.0,
    what: str = "condition",
    *,
    interval_s: float = 0.02,
    check: Callable[[], object] | None = None,
    detail: Callable[[], str] | None = None,
) -> object:
    """:func:`eventually` for a running event loop: between probes it awaits instead of
    blocking, so the servers and clients under test keep running in the same loop.

    ``probe`` may return the value or an awaitable of it (an ``async def`` probe). The 10 s
    default suits what these tests wait for: brokers and name servers on loopback, in-process
    services."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s, detail)
        await asyncio.sleep(interval_s)
