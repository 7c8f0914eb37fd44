"""The pure parts of streaming reads: how a micro-batch's messages are shared out over the
queues, how its end offsets follow from its start and the queues now, and the stream options."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyspark")  # reconsume.spark.stream builds on pyspark's reader classes

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from reconsume.errors import InvalidArgumentError
from reconsume.spark.offsets import EARLIEST, LATEST, QueueKey, QueueRange, TopicOffsets
from reconsume.spark.reading import ReadOptions
from reconsume.spark.stream import (
    ReconsumeStreamReader,
    admit,
    next_offsets,
    plan_batch,
)

A0, A1, B0, B1 = QueueKey("a", 0), QueueKey("a", 1), QueueKey("b", 0), QueueKey("b", 1)


def queue(key: QueueKey, low: int, high: int) -> QueueRange:
    return QueueRange("t", key.broker, key.queue_id, f"{key.broker}:10911", low, high)


def offsets(**by_queue: int) -> TopicOffsets:
    """``offsets(a0=3, b1=4)``: queue ``a:0`` at 3, ``b:1`` at 4."""
    return TopicOffsets.of("t", {QueueKey(k[0], int(k[1:])): v for k, v in by_queue.items()})


def test_a_backlog_within_the_limit_is_taken_whole() -> None:
    assert admit({A0: 3, A1: 0, B0: 4}, 7) == {A0: 3, B0: 4}
    assert admit({A0: 3, B0: 4}, 100) == {A0: 3, B0: 4}
    assert admit({A0: 0}, 5) == {}


def test_a_limited_batch_is_shared_in_proportion_to_the_backlogs() -> None:
    # One each, then 6 more in proportion to 90, 9 and 0 beyond that one.
    assert admit({A0: 91, A1: 10, B0: 1}, 9) == {A0: 6, A1: 2, B0: 1}
    # Equal backlogs, equal shares; the remainder to the first queues.
    assert admit({A0: 10, A1: 10, B0: 10, B1: 10}, 7) == {A0: 2, A1: 2, B0: 2, B1: 1}


def test_a_limit_below_the_number_of_waiting_queues_takes_the_largest_backlogs() -> None:
    assert admit({A0: 2, A1: 5, B0: 5, B1: 1}, 2) == {A1: 1, B0: 1}


@given(
    st.dictionaries(
        st.builds(QueueKey, st.sampled_from(["a", "b", "c"]), st.integers(0, 7)),
        st.integers(0, 10_000),
        max_size=12,
    ),
    st.integers(1, 5_000),
)
def test_every_share_is_bounded_and_fair(backlogs: dict[QueueKey, int], limit: int) -> None:
    shares = admit(backlogs, limit)
    total = sum(backlogs.values())
    waiting = [key for key, backlog in backlogs.items() if backlog > 0]
    assert sum(shares.values()) == min(limit, total)
    assert all(0 < shares[key] <= backlogs[key] for key in shares)
    if limit >= len(waiting):
        assert set(shares) == set(waiting)  # every queue with a backlog makes progress
        if total > limit:
            for key in waiting:  # within one message of its proportional share
                fair = 1 + (limit - len(waiting)) * (backlogs[key] - 1) / (total - len(waiting))
                assert abs(shares[key] - fair) < 1


def test_the_next_offsets_read_everything_available_without_a_limit() -> None:
    start = offsets(a0=3, a1=5, b0=0)
    available = [queue(A0, 0, 10), queue(A1, 0, 5), queue(B0, 0, 4)]
    assert next_offsets(start, available) == offsets(a0=10, a1=5, b0=4)
    # Nothing new: the start again, so Spark plans no batch.
    assert next_offsets(offsets(a0=10, a1=5), [queue(A0, 2, 10), queue(A1, 0, 5)]) == offsets(
        a0=10, a1=5
    )


def test_the_next_offsets_merge_new_vanished_and_truncated_queues() -> None:
    start = offsets(a0=3, a1=1, b0=7)
    available = [
        queue(A0, 0, 5),
        queue(A1, 4, 6),  # messages 1-3 deleted: on from the earliest
        queue(B1, 2, 9),  # new to the stream: from its earliest
    ]  # b:0 is not routed now: its offset is kept
    assert next_offsets(start, available) == offsets(a0=5, a1=6, b0=7, b1=9)
    # A new queue with nothing to take this batch joins at its earliest offset.
    assert next_offsets(offsets(a0=0), [queue(A0, 0, 5), queue(B1, 2, 3)], limit=1) == offsets(
        a0=1, b1=2
    )
    # An offset beyond a queue's latest (the queue was reset) stays until it is reached.
    assert next_offsets(offsets(a0=8), [queue(A0, 0, 5)]) == offsets(a0=8)


def test_the_next_offsets_respect_the_limit_and_the_available_now_target() -> None:
    start = offsets(a0=0, a1=0, b0=0, b1=0)
    available = [queue(A0, 0, 10), queue(A1, 0, 10), queue(B0, 0, 10), queue(B1, 0, 10)]
    assert next_offsets(start, available, limit=7) == offsets(a0=2, a1=2, b0=2, b1=1)
    # Trigger.AvailableNow: up to the target; a queue the target lacks appeared after it.
    target = offsets(a0=4, a1=10, b0=0)
    assert next_offsets(start, available, target=target) == offsets(a0=4, a1=10, b0=0, b1=0)
    reached = offsets(a0=4, a1=10, b0=0, b1=0)
    assert next_offsets(reached, available, limit=3, target=target) == reached


def test_a_batch_plans_one_range_per_queue_with_messages() -> None:
    start = offsets(a0=3, a1=5, b0=1)
    end = offsets(a0=6, a1=5, b0=4, b1=2)
    available = [queue(A0, 0, 9), queue(A1, 0, 9), queue(B0, 2, 9), queue(B1, 0, 9)]
    assert plan_batch(start, end, available) == [
        queue(A0, 3, 6),
        queue(B0, 2, 4),  # offset 1 deleted since: from the earliest
        queue(B1, 0, 2),  # new: from the earliest
    ]
    # A queue without messages in the batch need not be routed.
    assert plan_batch(start, end, available[:1] + available[2:]) == plan_batch(
        start, end, available
    )
    with pytest.raises(InvalidArgumentError, match=r"t queue b:0 to read is not routed now"):
        plan_batch(start, end, available[:2])


def test_stream_options_start_at_latest_and_refuse_ending_offsets() -> None:
    base = {"nameServer": "ns:9876", "topic": "t"}
    stream = ReadOptions.parse(base, streaming=True)
    assert (stream.starting, stream.max_per_trigger) == (LATEST, None)
    assert ReadOptions.parse(base).starting == EARLIEST
    limited = ReadOptions.parse({**base, "MaxMessagesPerTrigger": "25"}, streaming=True)
    assert limited.max_per_trigger == 25
    assert ReconsumeStreamReader(limited).getDefaultReadLimit() == ReadMaxRows(25)
    assert ReconsumeStreamReader(stream).getDefaultReadLimit() == ReadAllAvailable()
    with pytest.raises(InvalidArgumentError, match="endingOffsets is for batch reads"):
        ReadOptions.parse({**base, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(InvalidArgumentError, match="maxMessagesPerTrigger is for streams"):
        ReadOptions.parse({**base, "maxMessagesPerTrigger": "5"})
    with pytest.raises(InvalidArgumentError, match="must be positive"):
        ReadOptions.parse({**base, "maxMessagesPerTrigger": "0"}, streaming=True)


def test_skip_offsets_are_sorted_and_merged_per_queue_and_bad_ones_refused() -> None:
    base = {"nameServer": "ns:9876", "topic": "t"}
    assert ReadOptions.parse(base).skip == {}
    skipping = ReadOptions.parse({**base, "skipOffsets": '{"b:0": [[5, 7], [1, 2], [2, 3]]}'})
    assert skipping.skip == {QueueKey("b", 0): ((1, 3), (5, 7))}
    for bad in ('{"b:0": [[1]]}', "[1, 2]", '{"b": [[1, 2]]}', "not json"):
        with pytest.raises(InvalidArgumentError, match=r"skipOffsets|queue 'b'"):
            ReadOptions.parse({**base, "skipOffsets": bad})
