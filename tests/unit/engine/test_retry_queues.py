"""How a retry topic changes shape when retryQueueNums changes: written queues at once, read
queues only once drained (DESIGN §3, "Retry topology changes")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.retry_queues import (
    drained_read_queue_nums,
    is_draining,
    queue_drained,
    resized_retry_topic,
    updated_retry_topic,
    writable_queue,
)
from reconsume.message.configs import PERM_READ, TopicConfig

RETRY = "%RETRY%g"


def topic(read: int, write: int, **changes: object) -> TopicConfig:
    return TopicConfig(RETRY, read_queue_nums=read, write_queue_nums=write).with_changes(**changes)


@pytest.mark.parametrize(
    ("current", "queues", "expected"),
    [
        ((4, 4), 1, (4, 1)),  # lowered: written at once, read until drained
        ((1, 1), 4, (4, 4)),  # raised: new queues at once
        ((4, 1), 2, (4, 2)),  # raised while draining: the undrained queues stay readable
        ((4, 1), 4, (4, 4)),  # back to where it was: nothing left to drain
        ((4, 1), 6, (6, 6)),
        ((3, 3), 3, (3, 3)),
        ((4, 4), 0, (4, 4)),  # retryQueueNums 0 drops send-backs; the topic stays as it is
        ((4, 4), -1, (4, 4)),
    ],
)
def test_a_group_change_resizes_its_retry_topic(
    current: tuple[int, int], queues: int, expected: tuple[int, int]
) -> None:
    before = topic(*current)
    after = resized_retry_topic(before, queues)
    assert (after.read_queue_nums, after.write_queue_nums) == expected
    if expected == current:
        assert after is before  # unchanged: nothing to store or announce


def test_a_resize_keeps_everything_but_the_counts() -> None:
    before = topic(4, 4, perm=PERM_READ, topic_sys_flag=2)
    after = resized_retry_topic(before, 1)
    assert after == before.with_changes(write_queue_nums=1)


@pytest.mark.parametrize(
    ("current", "requested", "expected"),
    [
        (None, (1, 1), (1, 1)),
        (None, (1, 4), (4, 4)),  # never written where nobody reads
        ((4, 4), (1, 1), (4, 1)),  # lowered: the removed queues drain first
        ((4, 4), (2, 3), (4, 3)),
        ((4, 1), (8, 8), (8, 8)),
        ((2, 2), (6, 2), (6, 2)),  # stored as asked; the drain check lowers what is empty
    ],
)
def test_an_admin_update_of_a_retry_topic_never_strands_retries(
    current: tuple[int, int] | None, requested: tuple[int, int], expected: tuple[int, int]
) -> None:
    wanted = topic(*requested, perm=PERM_READ)
    stored = updated_retry_topic(None if current is None else topic(*current), wanted)
    assert (stored.read_queue_nums, stored.write_queue_nums) == expected
    assert stored.perm == PERM_READ


def test_draining_means_more_read_than_write_queues() -> None:
    assert is_draining(topic(4, 1))
    assert not is_draining(topic(4, 4))
    assert not is_draining(topic(1, 4))


def test_a_retry_for_a_removed_queue_goes_to_a_remaining_one() -> None:
    assert [writable_queue(q, 4) for q in range(4)] == [0, 1, 2, 3]
    assert [writable_queue(q, 1) for q in range(4)] == [0, 0, 0, 0]
    assert [writable_queue(q, 2) for q in range(5)] == [0, 1, 0, 1, 0]
    assert writable_queue(3, 0) == 3  # nothing is writable: left for the store to refuse


@given(st.integers(0, 2000), st.integers(1, 1024))
def test_writable_queue_is_always_written_to(queue_id: int, write: int) -> None:
    chosen = writable_queue(queue_id, write)
    assert 0 <= chosen < write
    if queue_id < write:
        assert chosen == queue_id


@pytest.mark.parametrize(
    ("committed", "min_offset", "max_offset", "drained"),
    [
        (10, 0, 10, True),
        (9, 0, 10, False),
        (12, 0, 10, True),
        (None, 0, 0, True),  # never written to
        (None, 0, 3, False),  # written, never consumed
        (None, 7, 7, True),  # everything removed by retention
        (2, 7, 7, True),
        (2, 5, 7, False),
    ],
)
def test_a_queue_is_drained_once_the_committed_offset_reaches_its_end(
    committed: int | None, min_offset: int, max_offset: int, drained: bool
) -> None:
    assert queue_drained(committed, min_offset, max_offset) is drained


@pytest.mark.parametrize(
    ("read", "write", "undrained", "expected"),
    [
        (4, 1, set(), 1),
        (4, 1, {3}, 4),
        (4, 1, {1}, 2),  # queues 2 and 3 drained: they stop being read
        (4, 1, {0}, 1),  # queue 0 is still written to: not for the drain to decide
        (4, 1, {2}, 3),
        (4, 4, {3}, 4),
        (6, 2, {2, 4}, 5),
    ],
)
def test_the_read_count_drops_past_the_highest_undrained_queue(
    read: int, write: int, undrained: set[int], expected: int
) -> None:
    asked: list[int] = []

    def drained(queue_id: int) -> bool:
        asked.append(queue_id)
        return queue_id not in undrained

    assert drained_read_queue_nums(topic(read, write), drained) == expected
    assert all(q >= write for q in asked)  # written queues are never examined


@given(
    st.integers(0, 64).flatmap(
        lambda write: st.tuples(
            st.just(write),
            st.integers(write, 128),
            st.sets(st.integers(0, 128)),
        )
    )
)
def test_no_undrained_queue_ever_stops_being_read(case: tuple[int, int, set[int]]) -> None:
    write, read, undrained = case
    after = drained_read_queue_nums(topic(read, write), lambda q: q not in undrained)
    assert write <= after <= read
    assert all(q < after for q in undrained if write <= q < read)
    # And nothing drained above the undrained queues is kept.
    assert after == max([write] + [q + 1 for q in undrained if write <= q < read])
