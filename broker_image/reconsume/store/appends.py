"""Appending to the store: records checked, written straight into the mapped commit log and
indexed in their consume queue under the store's one lock; durability waited for apart
(:mod:`reconsume.store.durability`).

:class:`Appends` is a part of :class:`~reconsume.store.store.MessageStore`, which opens what
it names.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from struct import Struct
from zlib import crc32

from reconsume.errors import (
    InvalidArgumentError,
    MessageTooLargeError,
    NotMasterError,
    StoreClosedError,
)
from reconsume.message.batch import BatchPart, merge_properties
from reconsume.message.codec import MAX_PROPERTIES_BYTES, MAX_TOPIC_BYTES, pack_record
from reconsume.message.names import validate_topic
from reconsume.message.sysflag import HOST_V6_MASK
from reconsume.store.commitlog import CommitLog
from reconsume.store.durability import Durability
from reconsume.store.flush import GroupCommit, all_done
from reconsume.store.maintenance import Background
from reconsume.store.queue_table import QueueTable
from reconsume.store.requests import BatchPut, PutRequest, PutResult, TagsCode
from reconsume.store.settings import FlushMode, StoreSettings

_new_tuple = tuple.__new__
# (request, topic bytes, properties bytes, head layout, sysFlag, body CRC, record size)
_Prepared = tuple[PutRequest, bytes, bytes, Struct, int, int, int]


def _check_queue_id(queue_id: int) -> None:
    if not 0 <= queue_id <= 0x7FFFFFFF:
        # a negative id's directory is not reloaded on restart; a larger one does not pack
        raise InvalidArgumentError(f"queue id {queue_id} is not a non-negative int32")


class Appends:
    """The store's writes: :meth:`append`, :meth:`append_batch`, :meth:`append_parts` and
    the waits for durability."""

    root: Path
    settings: StoreSettings
    commitlog: CommitLog
    queues: QueueTable
    durability: Durability
    group_commit: GroupCommit
    is_replica: bool
    replicated: Callable[[int], Future[None]] | None
    writable_until: float | None
    _lock: threading.RLock
    _closed: bool
    _background: Background | None
    _store_host: bytes
    _heads: dict[int, tuple[Struct, int]]
    _tags_code: TagsCode
    _valid_topics: dict[str, bytes]

    def _prepare(self, request: PutRequest) -> _Prepared:
        """Check one message and compute what its record needs, outside the lock."""
        properties = request.properties.encode()
        topic = self._valid_topics.get(request.topic)
        if topic is None:
            topic = self._topic_bytes(request.topic)
        _check_queue_id(request.queue_id)
        head, v6_bits = self._head(request.born_host)
        body = request.body
        size = head.size + len(body) + 3 + len(topic) + len(properties)
        if size > self.settings.max_message_bytes or len(properties) > MAX_PROPERTIES_BYTES:
            raise self._too_large(request.topic, size, len(properties))
        sys_flag = (request.sys_flag & ~HOST_V6_MASK) | v6_bits
        return request, topic, properties, head, sys_flag, crc32(body) & 0x7FFFFFFF, size

    def _topic_bytes(self, topic: str) -> bytes:
        """``topic`` checked (once) and encoded."""
        encoded = self._valid_topics.get(topic)
        if encoded is None:
            encoded = topic.encode()
            validate_topic(topic)
            if len(encoded) > MAX_TOPIC_BYTES:
                raise MessageTooLargeError(f"topic {topic!r} exceeds {MAX_TOPIC_BYTES}")
            self._valid_topics[topic] = encoded
        return encoded

    def _head(self, born_host: bytes) -> tuple[Struct, int]:
        """The record head layout and v6 bits for a packed born host of this length."""
        head_bits = self._heads.get(len(born_host))
        if head_bits is None:
            raise InvalidArgumentError(
                f"born host is {len(born_host)} bytes; a packed host is 8 or 20"
            )
        return head_bits

    def _too_large(self, topic: str, size: int, properties: int) -> MessageTooLargeError:
        return MessageTooLargeError(
            f"message to {topic} is {size} bytes stored (properties {properties}); the limit "
            f"is {self.settings.max_message_bytes} (properties {MAX_PROPERTIES_BYTES})"
        )

    def _write(self, prepared: _Prepared, now_ms: int) -> PutResult:
        """Append one prepared record and index it; the caller holds the lock."""
        request, topic, properties, head, sys_flag, crc, size = prepared
        queue = self.queues.queues.get((request.topic, request.queue_id))
        if queue is None:
            queue = self.queues.get_or_create(request.topic, request.queue_id)
        commitlog = self.commitlog
        segment, local = commitlog.reserve(size)
        phys = commitlog.write_offset
        queue_offset = queue.max_offset
        pack_record(
            segment.mm,
            local,
            size,
            head,
            crc,
            request.queue_id,
            request.flag,
            queue_offset,
            phys,
            sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            now_ms,
            self._store_host,
            request.reconsume_times,
            request.prepared_transaction_offset,
            request.body,
            topic,
            properties,
        )
        commitlog.write_offset = phys + size
        queue.append(phys, size, self._tags_code(request.topic, request.properties, now_ms))
        return _new_tuple(PutResult, (phys, size, queue_offset, now_ms))

    def append(self, request: PutRequest) -> PutResult:
        """Append one message; durable once :meth:`durable` of its end offset completes."""
        prepared = self._prepare(request)
        lock = self._lock
        lock.acquire()  # not `with`: its __enter__/__exit__ lookups cost as much as the rest
        try:
            self._check_writable()
            return self._write(prepared, time.time_ns() // 1_000_000)
        finally:
            lock.release()

    def append_batch(self, requests: Sequence[PutRequest]) -> list[PutResult]:
        """Append messages in order under one lock; all are checked before any is written."""
        prepared = [self._prepare(request) for request in requests]
        lock = self._lock
        lock.acquire()
        try:
            self._check_writable()
            now_ms = time.time_ns() // 1_000_000
            write = self._write
            return [write(item, now_ms) for item in prepared]
        finally:
            lock.release()

    def append_parts(
        self,
        topic: str,
        queue_id: int,
        parts: Sequence[BatchPart],
        batch_properties: str,
        *,
        sys_flag: int,
        born_timestamp_ms: int,
        born_host: bytes,
        reconsume_times: int,
    ) -> BatchPut:
        """Append the messages of a batch body (:func:`~reconsume.message.batch.split_batch`)
        as :meth:`append_batch` appends a request each, every message's properties followed by
        ``batch_properties``: all checked before any is written, under one lock. Without a
        request and a result a message, and with one loop, a batch message costs the broker
        about 30 % less (``bench.broker_requests``). The loop is :meth:`_write`'s, inlined:
        a call a message with its arguments would cost about what a record's packing does."""
        topic_bytes = self._topic_bytes(topic)
        _check_queue_id(queue_id)
        head, v6_bits = self._head(born_host)
        fixed = head.size + 3 + len(topic_bytes)
        limit = self.settings.max_message_bytes
        prepared: list[tuple[int, bytes, str, bytes, int, int]] = []
        for flag, body, own in parts:
            properties = merge_properties(own, batch_properties)
            encoded = properties.encode()
            size = fixed + len(body) + len(encoded)
            if size > limit or len(encoded) > MAX_PROPERTIES_BYTES:
                raise self._too_large(topic, size, len(encoded))
            prepared.append((flag, body, properties, encoded, crc32(body) & 0x7FFFFFFF, size))
        flags = (sys_flag & ~HOST_V6_MASK) | v6_bits
        offsets: list[int] = []
        codes: list[int] = []
        lock = self._lock
        lock.acquire()
        try:
            self._check_writable()
            now_ms = time.time_ns() // 1_000_000
            queue = self.queues.get_or_create(topic, queue_id)
            first = queue.max_offset
            commitlog, store_host, tags_code = self.commitlog, self._store_host, self._tags_code
            for flag, body, properties, encoded, crc, size in prepared:
                segment, local = commitlog.reserve(size)
                phys = commitlog.write_offset
                pack_record(
                    segment.mm, local, size, head, crc, queue_id, flag, queue.max_offset, phys,
                    flags, born_timestamp_ms, born_host, now_ms, store_host, reconsume_times, 0,
                    body, topic_bytes, encoded,
                )  # fmt: skip
                commitlog.write_offset = phys + size
                code = tags_code(topic, properties, now_ms)
                queue.append(phys, size, code)
                offsets.append(phys)
                codes.append(code)
            return BatchPut(offsets, commitlog.write_offset, first, now_ms, codes)
        finally:
            lock.release()

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if self.is_replica:
            raise NotMasterError(f"store {self.root} is a replica: it is written by its master")
        until = self.writable_until
        if until is not None and time.monotonic() >= until:
            raise NotMasterError(f"store {self.root}: the master's lease ran out")
        self.durability.check_writable()

    def durable(self, end_offset: int) -> Future[None]:
        """A future done when every byte below ``end_offset`` is on disk."""
        future = self.group_commit.request(end_offset)
        if self._background is None and not future.done():
            self.durability.flush_commit_log()  # no flush thread: flush here
        return future

    def stored(self, end_offset: int) -> Future[None]:
        """A future done once every byte below ``end_offset`` counts as stored: durable here
        and, with :attr:`replicated` set, on the replicas."""
        durable = self.durable(end_offset)
        if self.replicated is None:
            return durable
        return all_done([durable, self.replicated(end_offset)])

    def put(self, request: PutRequest, timeout_s: float | None = None) -> PutResult:
        """Append; under Sync flush return only after the covering fsync."""
        result = self.append(request)
        if self.settings.flush_mode is FlushMode.SYNC:
            self.durable(result.end_offset).result(timeout_s)
        return result

    def put_batch(
        self, requests: Sequence[PutRequest], timeout_s: float | None = None
    ) -> list[PutResult]:
        results = self.append_batch(requests)
        if results and self.settings.flush_mode is FlushMode.SYNC:
            self.durable(results[-1].end_offset).result(timeout_s)
        return results

    async def put_async(self, request: PutRequest) -> PutResult:
        """:meth:`put` for an event loop: the fsync wait does not block the loop."""
        result = self.append(request)
        if self.settings.flush_mode is FlushMode.SYNC:
            await asyncio.wrap_future(self.durable(result.end_offset))
        return result
