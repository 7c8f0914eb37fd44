"""Reads under a commit-log limit (a master's read limit at what its replicas hold): a queue
shows only its records that end within the limit, an offset among the hidden ones reads as the
end of the queue (a consumer waits there, it is never moved), and the max offset agrees."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reconsume.store import GetStatus, MessageStore

from ._helpers import request, small_settings

TOPIC = "orders"


@settings(max_examples=60, deadline=None)
@given(
    queues=st.lists(st.integers(0, 2), min_size=0, max_size=30),
    limit_at=st.floats(0, 1),
    start=st.integers(0, 34),
    max_count=st.integers(1, 40),
)
def test_a_queue_shows_only_the_records_that_end_within_the_limit(
    queues: list[int], limit_at: float, start: int, max_count: int
) -> None:
    with (
        tempfile.TemporaryDirectory() as root,
        MessageStore(Path(root), small_settings(), background=False) as store,
    ):
        ends: dict[int, list[int]] = {0: [], 1: [], 2: []}
        for i, queue_id in enumerate(queues):
            result = store.put(request(TOPIC, queue_id, f"m{i}".encode().ljust(30 + i, b".")))
            ends[queue_id].append(result.end_offset)
        limit = round(limit_at * store.commitlog.write_offset)
        for queue_id, queue_ends in ends.items():
            written = len(queue_ends)
            visible = sum(1 for end in queue_ends if end <= limit)
            assert store.max_offset(TOPIC, queue_id, limit) == visible
            got = store.get_messages(TOPIC, queue_id, start, max_count=max_count, log_limit=limit)
            if written == 0:
                assert got.status is GetStatus.NO_MATCHED_LOGIC_QUEUE
                continue
            assert got.max_offset == visible
            if start < visible:
                assert got.status is GetStatus.FOUND
                assert got.queue_offsets == list(range(start, min(visible, start + max_count)))
                assert got.next_begin_offset == got.queue_offsets[-1] + 1
            elif start <= written:
                assert (got.status, got.next_begin_offset, got.records) == (
                    GetStatus.OFFSET_OVERFLOW_ONE,
                    start,
                    [],
                )
            else:
                assert got.status is GetStatus.OFFSET_OVERFLOW_BADLY


def test_without_a_limit_or_with_one_at_the_end_every_record_reads(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings(), background=False) as store:
        for i in range(5):
            store.put(request(TOPIC, 0, f"m{i}".encode()))
        end = store.commitlog.write_offset
        for limit in (None, end, end + 100):
            got = store.get_messages(TOPIC, 0, 0, max_count=10, log_limit=limit)
            assert (got.queue_offsets, got.max_offset) == ([0, 1, 2, 3, 4], 5)
            assert store.max_offset(TOPIC, 0, limit) == 5
