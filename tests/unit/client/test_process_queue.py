"""ProcessQueue: the committable offset, flow control, orderly take/commit/rollback and the
in-listener count a hand-over waits on.

Async behaviour runs in its own event loop per test (asyncio.run). Whether a waiter is
blocked is observed after letting the loop run every ready callback once (no time passes);
waiters that must wake are awaited with a generous deadline that only guards against a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import replace
from random import Random
from typing import Any, TypeVar

from hypothesis import given
from hypothesis import strategies as st

from reconsume.client.process_queue import LOCK_EXPIRY_S, ProcessQueue
from tests.unit.client._helpers import QUEUE, at

T = TypeVar("T")
HANG_S = 5.0
"""Deadline for something that must happen at once; reached only when it never does."""


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, HANG_S))


async def let_ready_tasks_run() -> None:
    """One turn of the event loop: every task that can proceed takes its next step."""
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn


def spawn(awaitable: Awaitable[T]) -> asyncio.Future[T]:
    return asyncio.ensure_future(awaitable)


# --------------------------------------------------------------------------- offsets
def test_remove_returns_the_smallest_offset_still_held() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    m = {message.queue_offset: message for message in at(10, 11, 12, 13, 14)}
    pq.put(m.values(), pulled_to=15)
    assert len(pq) == 5
    assert pq.remove([m[11]]) == 10
    assert pq.remove([m[10]]) == 12
    assert pq.remove([m[14]]) == 12
    assert pq.remove([m[13], m[12]]) == 15
    assert len(pq) == 0


def test_remove_when_empty_returns_the_pulls_next_offset() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    # the pull's next offset is past the last message: the tail was filtered out by tag
    pq.put(at(3, 4), pulled_to=9)
    assert pq.remove(at(3, 4)) == 9
    # without a pull offset: one past the largest message pulled
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(3, 4))
    assert pq.remove(at(4, 3)) == 5


def test_remove_before_anything_was_pulled_commits_nothing() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    assert pq.remove([]) == -1
    assert pq.remove(at(0)) == -1


def test_removing_again_or_unknown_messages_changes_nothing() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(0, 1, 2), pulled_to=3)
    assert pq.remove(at(1)) == 0
    assert pq.remove(at(1, 7)) == 0
    assert len(pq) == 2


def test_later_pulls_extend_the_queue() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(0, 1), pulled_to=2)
    pq.put(at(2, 3), pulled_to=6)
    assert pq.remove(at(0, 1)) == 2
    assert pq.remove(at(2, 3)) == 6
    # a stale (smaller) pull offset never moves the committable offset back
    pq.put(at(6), pulled_to=4)
    assert pq.remove(at(6)) == 7


@given(
    st.integers(0, 1_000),
    st.integers(1, 30),
    st.integers(0, 5),
    st.randoms(use_true_random=False),
)
def test_out_of_order_completion_commits_only_below_every_unfinished_message(
    first: int, count: int, filtered_tail: int, rng: Random
) -> None:
    messages = at(*range(first, first + count))
    pulled_to = first + count + filtered_tail
    pq = ProcessQueue(QUEUE, max_held=1_000)
    pq.put(messages, pulled_to=pulled_to)
    done_order = list(messages)
    rng.shuffle(done_order)
    remaining = {m.queue_offset for m in messages}
    committed: list[int] = []
    while done_order:
        batch = [done_order.pop() for _ in range(min(rng.randint(1, 3), len(done_order)))]
        remaining -= {m.queue_offset for m in batch}
        offset = pq.remove(batch)
        assert offset == (min(remaining) if remaining else pulled_to)
        committed.append(offset)
    assert committed == sorted(committed)
    assert len(pq) == 0


# --------------------------------------------------------------------------- flow control
def test_wait_for_room_blocks_at_max_held_and_wakes_on_remove() -> None:
    async def scenario() -> None:
        pq = ProcessQueue(QUEUE, max_held=3)
        await pq.wait_for_room()  # empty: room at once
        pq.put(at(0, 1), pulled_to=2)
        await pq.wait_for_room()  # 2 < 3
        pq.put(at(2), pulled_to=3)
        waiter = spawn(pq.wait_for_room())
        await let_ready_tasks_run()
        assert not waiter.done()
        # still full after a pull that brings more
        pq.put(at(3), pulled_to=4)
        pq.remove(at(3))
        await let_ready_tasks_run()
        assert not waiter.done()
        pq.remove(at(1))
        await waiter
        # a later waiter is not blocked while there is room
        await pq.wait_for_room()

    run(scenario())


def test_orderly_take_holds_the_room_until_commit() -> None:
    async def scenario() -> None:
        pq = ProcessQueue(QUEUE, max_held=2)
        pq.put(at(0, 1), pulled_to=2)
        assert [m.queue_offset for m in pq.take(2)] == [0, 1]
        waiter = spawn(pq.wait_for_room())
        await let_ready_tasks_run()
        assert not waiter.done()  # taken messages still count
        pq.rollback(at(1))
        await let_ready_tasks_run()
        assert not waiter.done()
        assert pq.commit() == 1
        await waiter

    run(scenario())


# --------------------------------------------------------------------------- orderly
def test_take_hands_out_messages_in_offset_order() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(0, 1, 2, 3, 4), pulled_to=5)
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]
    assert pq.commit() == 2
    assert [m.queue_offset for m in pq.take(2)] == [2, 3]
    assert pq.commit() == 4
    assert [m.queue_offset for m in pq.take(10)] == [4]
    assert pq.take(10) == []
    assert pq.commit() == 5
    assert len(pq) == 0


def test_commit_without_taken_messages_commits_nothing() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    assert pq.commit() == -1
    pq.put(at(0), pulled_to=1)
    assert pq.commit() == -1


def test_commit_of_the_last_message_moves_to_the_pulls_next_offset() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(7, 8), pulled_to=12)
    pq.take(1)
    assert pq.commit() == 8  # 8 is still held: the pull offset must not be used
    pq.take(1)
    assert pq.commit() == 12


def test_rollback_puts_messages_back_in_front_in_order() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(0, 1, 2), pulled_to=3)
    taken = pq.take(3)
    pq.put(at(3, 4), pulled_to=5)  # a pull arrives while the batch is in the listener
    again = [replace(m, reconsume_times=m.reconsume_times + 1) for m in taken]
    pq.rollback(reversed(again))
    assert len(pq) == 5
    retaken = pq.take(10)
    assert [m.queue_offset for m in retaken] == [0, 1, 2, 3, 4]
    assert [m.reconsume_times for m in retaken] == [1, 1, 1, 0, 0]
    assert pq.commit() == 5


def test_partial_rollback_commits_what_stayed_taken() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    pq.put(at(0, 1, 2, 3), pulled_to=4)
    pq.take(3)
    pq.rollback(at(1, 2))
    assert pq.commit() == 1
    assert [m.queue_offset for m in pq.take(10)] == [1, 2, 3]
    assert pq.commit() == 4


# --------------------------------------------------------------------------- quiescence
def test_wait_quiet_waits_for_every_running_batch() -> None:
    async def scenario() -> None:
        pq = ProcessQueue(QUEUE, max_held=100)
        assert await pq.wait_quiet(HANG_S)
        pq.begin()
        pq.begin()
        waiter = spawn(pq.wait_quiet(HANG_S))
        await let_ready_tasks_run()
        assert not waiter.done()
        pq.end()
        await let_ready_tasks_run()
        assert not waiter.done()
        pq.end()
        assert await waiter

    run(scenario())


def test_wait_quiet_reports_a_timeout() -> None:
    async def scenario() -> None:
        pq = ProcessQueue(QUEUE, max_held=100)
        pq.begin()
        assert not await pq.wait_quiet(0.01)
        pq.end()
        assert await pq.wait_quiet(HANG_S)

    run(scenario())


def test_paused_or_dropped_queues_are_inactive() -> None:
    pq = ProcessQueue(QUEUE, max_held=100)
    assert pq.is_active()
    pq.paused = True
    assert not pq.is_active()
    pq.paused = False
    pq.dropped = True
    assert not pq.is_active()


def test_a_lock_is_trusted_until_it_expires() -> None:
    def validity(locked: bool, age_s: float) -> bool:
        pq = ProcessQueue(QUEUE, max_held=100)
        pq.locked = locked
        pq.last_lock_s = time.monotonic() - age_s
        return pq.lock_valid

    assert validity(locked=True, age_s=0)
    assert not validity(locked=False, age_s=0)
    assert not validity(locked=True, age_s=LOCK_EXPIRY_S + 1)
