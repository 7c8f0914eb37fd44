"""Held pulls and the read limit: a stored message wakes its held pulls at once when reads see
it, otherwise once the limit passes its end; the wake-ups kept waiting are bounded."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from reconsume.broker import longpoll
from reconsume.broker.longpoll import PullWaiters


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on its own event loop (held pulls' futures need one)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@in_loop
async def test_a_message_within_the_limit_wakes_its_pulls_at_once() -> None:
    waiters = PullWaiters()
    held = waiters.hold("orders", 0, 5, None)
    waiters.appended(100, None, "orders", 0, 6, lambda: [7])
    assert held.woken.done()
    other = waiters.hold("orders", 1, 5, frozenset({9}))
    waiters.appended(200, 200, "orders", 1, 6, lambda: [7])  # a tag the pull filters out
    assert not other.woken.done()


@in_loop
async def test_a_message_past_the_limit_wakes_its_pulls_once_the_limit_passes_it() -> None:
    waiters = PullWaiters()
    first = waiters.hold("orders", 0, 5, None)
    second = waiters.hold("orders", 1, 0, None)
    asked: list[str] = []

    def tag_codes() -> list[int]:
        asked.append("asked")
        return [1]

    waiters.appended(150, 100, "orders", 0, 6, tag_codes)
    waiters.appended(180, 100, "orders", 1, 1, tag_codes)
    assert asked == ["asked", "asked"]  # kept with the wake-up: nothing else knows them later
    assert (first.woken.done(), second.woken.done()) == (False, False)
    waiters.visible(160)
    assert (first.woken.done(), second.woken.done()) == (True, False)
    waiters.visible(None)  # no limit any more (this broker alone, or a replica promoted)
    assert second.woken.done()
    waiters.release(first)
    waiters.release(second)
    assert len(waiters) == 0


@in_loop
async def test_a_pull_held_after_its_message_was_stored_is_still_woken_by_it() -> None:
    waiters = PullWaiters()
    waiters.appended(150, 100, "orders", 0, 6, lambda: [1])  # stored, not yet replicated
    held = waiters.hold("orders", 0, 5, None)  # the pull read nothing visible and waits
    waiters.visible(150)
    assert held.woken.done()


@in_loop
async def test_wake_ups_kept_for_the_limit_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(longpoll, "MAX_HIDDEN", 3)
    waiters = PullWaiters()
    held = waiters.hold("orders", 0, 0, None)
    for end in range(1, 4):
        waiters.appended(100 + end, 0, "orders", 1, end, lambda: [1])
    assert not held.woken.done()
    waiters.appended(200, 0, "orders", 0, 1, lambda: [1])  # the oldest is done early
    waiters.appended(201, 0, "orders", 1, 5, lambda: [1])
    waiters.appended(202, 0, "orders", 1, 6, lambda: [1])
    waiters.appended(203, 0, "orders", 1, 7, lambda: [1])  # now the orders/0 one goes early
    assert held.woken.done()
