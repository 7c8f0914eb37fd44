"""The store against a plain in-memory model: puts, batches, reads at any offset with any
limit and tag filter, reads by commit-log offset, restarts (clean and killed), topic deletion
and retention, with segments small enough that every few records roll one."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from reconsume.errors import MessageTooLargeError
from reconsume.message.codec import record_size
from reconsume.message.tags import tags_code
from reconsume.store import GetStatus, MessageStore, PutResult

from ._helpers import abandon, check_consistency, decode, request, small_settings

TOPICS = ("Alpha", "Beta", "%RETRY%g")
TAGS = (None, "a", "b")
SETTINGS = small_settings(retention_hours=1, consume_queue_entries_per_file=3)

topics = st.sampled_from(TOPICS)
queue_ids = st.integers(0, 3)
bodies = st.binary(max_size=400)
tags = st.sampled_from(TAGS)
messages = st.tuples(topics, queue_ids, bodies, tags)


@dataclass
class Stored:
    body: bytes
    tag: str | None
    commit_log_offset: int
    size: int


@dataclass
class QueueModel:
    low: int = 0
    """The minimum offset: entries below it were removed by retention."""
    messages: list[Stored] = field(default_factory=list)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="store-model-"))
        self.store = MessageStore(self.root, SETTINGS, background=False)
        self.queues: dict[tuple[str, int], QueueModel] = {}
        self.written: list[tuple[int, bytes]] = []  # (commit-log offset, body) of every put
        self.deleted: dict[str, int] = {}

    def teardown(self) -> None:
        try:
            if not self.store._closed:
                check_consistency(self.store, deleted=self.deleted)
        finally:
            self.store.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def _record(
        self, topic: str, queue_id: int, body: bytes, tag: str | None, result: PutResult
    ) -> None:
        queue = self.queues.setdefault((topic, queue_id), QueueModel())
        assert result.queue_offset == len(queue.messages)
        queue.messages.append(Stored(body, tag, result.commit_log_offset, result.size))
        self.written.append((result.commit_log_offset, body))

    @rule(message=messages)
    def put(self, message: tuple[str, int, bytes, str | None]) -> None:
        topic, queue_id, body, tag = message
        result = self.store.put(request(topic, queue_id, body, tags=tag))
        self._record(topic, queue_id, body, tag, result)

    @initialize(batch=st.lists(messages, min_size=4, max_size=16))
    def start_with(self, batch: list[tuple[str, int, bytes, str | None]]) -> None:
        """Begin with a few segments' worth of records, so retention and restarts bite early."""
        for topic, queue_id, body, tag in batch:
            result = self.store.put(request(topic, queue_id, body, tags=tag))
            self._record(topic, queue_id, body, tag, result)

    @rule(batch=st.lists(messages, min_size=1, max_size=4))
    def put_batch(self, batch: list[tuple[str, int, bytes, str | None]]) -> None:
        results = self.store.put_batch([request(t, q, b, tags=tag) for t, q, b, tag in batch])
        for (topic, queue_id, body, tag), result in zip(batch, results, strict=True):
            self._record(topic, queue_id, body, tag, result)

    @rule(topic=topics, extra=st.integers(1, 100))
    def put_too_large(self, topic: str, extra: int) -> None:
        size = SETTINGS.max_message_bytes - record_size(0, len(topic), 0) + extra
        end = self.store.commitlog.write_offset
        with pytest.raises(MessageTooLargeError):
            self.store.put(request(topic, 0, b"x" * size))
        assert self.store.commitlog.write_offset == end

    @rule(
        topic=topics,
        queue_id=queue_ids,
        where=st.integers(-2, 3),
        pick=st.floats(0, 1),
        max_count=st.integers(1, 6),
        wanted=st.none() | st.frozensets(st.sampled_from(TAGS), min_size=1),
    )
    def get(
        self,
        topic: str,
        queue_id: int,
        where: int,
        pick: float,
        max_count: int,
        wanted: frozenset[str | None] | None,
    ) -> None:
        model = self.queues.get((topic, queue_id))
        count = 0 if model is None else len(model.messages)
        offset = int(pick * count) if where == 0 else (count + where if where > 0 else where)
        if where == 1:
            offset = count  # exactly the end: nothing new yet
        codes = None if wanted is None else {tags_code(tag) for tag in wanted}
        got = self.store.get_messages(topic, queue_id, offset, max_count=max_count, tag_codes=codes)
        status, next_begin, expected = self._expect(model, offset, max_count, wanted)
        assert (got.status, got.next_begin_offset) == (status, next_begin)
        records = zip(got.queue_offsets, got.records, strict=True)
        assert [(i, decode(record).body) for i, record in records] == expected
        if model is not None:
            assert (got.min_offset, got.max_offset) == (model.low, len(model.messages))

    @staticmethod
    def _expect(
        model: QueueModel | None, offset: int, max_count: int, wanted: frozenset[str | None] | None
    ) -> tuple[GetStatus, int, list[tuple[int, bytes]]]:
        if model is None:
            return GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, []
        low, high = model.low, len(model.messages)
        if high == 0:
            return GetStatus.NO_MESSAGE_IN_QUEUE, 0, []
        if offset < low:
            return GetStatus.OFFSET_TOO_SMALL, low, []
        if offset == high:
            return GetStatus.OFFSET_OVERFLOW_ONE, offset, []
        if offset > high:
            return GetStatus.OFFSET_OVERFLOW_BADLY, 0 if low == 0 else high, []
        found: list[tuple[int, bytes]] = []
        index = offset
        while index < high and len(found) < max_count:
            stored = model.messages[index]
            if wanted is None or stored.tag in wanted:
                found.append((index, stored.body))
            index += 1
        return (GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE), index, found

    @precondition(lambda self: self.written)
    @rule(pick=st.floats(0, 1), shift=st.sampled_from([0, 0, 0, 1, 7]))
    def read_message(self, pick: float, shift: int) -> None:
        offset, body = self.written[min(int(pick * len(self.written)), len(self.written) - 1)]
        record = self.store.read_message(offset + shift)
        if shift or offset < self.store.commitlog.min_offset:
            assert record is None
        else:
            assert record is not None
            assert decode(record).body == body

    @rule(killed=st.booleans())
    def reopen(self, killed: bool) -> None:
        end = self.store.commitlog.write_offset
        if killed:
            abandon(self.store)
        else:
            self.store.close()
        self.store = MessageStore(self.root, SETTINGS, background=False)
        report = self.store.recovery
        assert (report.end_offset, report.truncated_at, report.anomalies) == (end, None, [])
        assert report.clean_shutdown is not killed
        check_consistency(self.store, deleted=self.deleted)

    @rule(topic=topics)
    def delete_topic(self, topic: str) -> None:
        known = sum(1 for t, _q in self.queues if t == topic)
        assert self.store.delete_topic(topic) == known
        self.queues = {key: queue for key, queue in self.queues.items() if key[0] != topic}
        self.deleted[topic] = self.store.commitlog.write_offset

    @rule()
    def retention(self) -> None:
        segments = len(self.store.commitlog.segments)
        later = time.time() + SETTINGS.retention_hours * 3600 + 60
        assert self.store.run_retention(now_s=later) == segments - 1
        log_min = self.store.commitlog.min_offset
        for queue in self.queues.values():
            queue.low = next(
                (i for i, m in enumerate(queue.messages) if m.commit_log_offset >= log_min),
                len(queue.messages),
            )

    @invariant()
    def offsets_match(self) -> None:
        assert self.store.queues.topics() == {topic for topic, _q in self.queues}
        for (topic, queue_id), model in self.queues.items():
            assert self.store.min_offset(topic, queue_id) == model.low
            assert self.store.max_offset(topic, queue_id) == len(model.messages)


# No shrinking: shrinking a run of a store on disk can take minutes, past the per-test
# timeout, and a failure still prints its whole run of steps. To shrink one while debugging,
# add Phase.shrink and run with ``-o timeout=0``.
StoreMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=40,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),
)
test_store_matches_model = StoreMachine.TestCase
