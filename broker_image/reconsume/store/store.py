"""The message store of one broker: commit log, consume queues, tables, recovery, flushing.

Appends are serialised by one lock and written straight into the mapped commit log, then
indexed in the consume queue of (topic, queue) in the same critical section. Durability is
separate: under Sync flush a put waits for the group commit that covers it; under Async a
background thread fsyncs periodically. Reads return copies of whole records.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Container, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from zlib import crc32

from reconsume.errors import (
    InvalidArgumentError,
    MessageTooLargeError,
    StoreClosedError,
    StoreError,
)
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.codec import (
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    RECORD_HEADS,
    pack_record,
)
from reconsume.message.names import validate_topic
from reconsume.message.sysflag import HOST_V6_MASK
from reconsume.message.tags import tags_code
from reconsume.store import reads
from reconsume.store.checkpoint import Checkpoint
from reconsume.store.commitlog import CommitLog
from reconsume.store.consume_queue import Entry
from reconsume.store.flush import GroupCommit
from reconsume.store.maintenance import Background
from reconsume.store.queue_table import QueueTable
from reconsume.store.recovery import RecoveryReport, recover_commit_log
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.store.tables import OffsetTable, group_table, topic_table

log = logging.getLogger(__name__)

TagsCode = Callable[[str, str, int], int]
"""(topic, encoded properties, store timestamp ms) → the consume-queue tag code. It must
depend on nothing else: recovery recomputes it from the record."""


def default_tags_code(topic: str, properties: str, store_timestamp_ms: int) -> int:
    return tags_code(props.find_property(properties, props.TAGS))


@dataclass(slots=True)
class PutRequest:
    """One message to append. ``properties`` is the encoded properties string."""

    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
    """Packed born host (:meth:`HostAddress.packed`)."""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class PutResult(NamedTuple):
    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp_ms: int


_new_tuple = tuple.__new__


_LOOPBACK = HostAddress(b"\x7f\x00\x00\x01", 10911)


class MessageStore:
    """Open (and recover) the store in ``root``; one process at a time may hold it."""

    def __init__(
        self,
        root: Path | str,
        settings: StoreSettings | None = None,
        *,
        store_host: HostAddress = _LOOPBACK,
        tags_code: TagsCode = default_tags_code,
        background: bool = True,
    ) -> None:
        self.root = Path(root)
        self.settings = settings or StoreSettings()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_directory(self.root)
        self._lock = threading.RLock()
        self._closed = False
        self.store_host = store_host
        self._store_host = store_host.packed()
        self._tags_code = tags_code
        self._valid_topics: dict[str, bytes] = {}
        """Topics appended to (validated), with their UTF-8 bytes."""
        try:
            self._open(background)
        except BaseException:
            # A failed open (unreadable table, I/O error) must not keep the directory locked.
            for part in (getattr(self, "queues", None), getattr(self, "commitlog", None)):
                if part is not None:
                    part.close()
            os.close(self._lock_fd)
            raise

    def _open(self, background: bool) -> None:
        """Open the files and recover, under the directory lock ``__init__`` took."""
        s = self.settings
        self.commitlog = CommitLog(
            self.root / "commitlog", s.commit_log_segment_bytes, preallocate=s.preallocate
        )
        self.queues = QueueTable(
            self.root / "consumequeue", s.consume_queue_entries_per_file, preallocate=s.preallocate
        )
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        self.topics = topic_table(config)
        self.groups = group_table(config)
        self.consumer_offsets = OffsetTable(config / "consumerOffset.json")
        self.schedule_offsets = OffsetTable(config / "delayOffset.json")
        self._checkpoint_path = self.root / "checkpoint"
        self.recovery = self._recover()
        log.info("store %s: %s", self.root, self.recovery.summary())
        self.group_commit = GroupCommit(self.commitlog.write_offset)
        self._checkpointed = -1
        self.write_checkpoint(clean=False)
        self._background = Background(self) if background else None
        if self._background is not None:
            self._background.start()

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> RecoveryReport:
        checkpoint = Checkpoint.load(self._checkpoint_path)
        report = RecoveryReport()
        start = self.commitlog.min_offset
        if checkpoint is not None:
            report.clean_shutdown = checkpoint.clean_shutdown
            report.checkpoint_offset = checkpoint.commit_log_offset
            if start <= checkpoint.commit_log_offset <= self.commitlog.active.end:
                start = checkpoint.commit_log_offset
        recover_commit_log(
            self.commitlog,
            self.queues,
            scan_start=start,
            dispatch=lambda *args: self._redispatch(report, *args),
            verify_crc=True,
            max_record_bytes=self.settings.max_message_bytes,
            quarantine_dir=self.root / "quarantine",
            report=report,
        )
        return report

    def _redispatch(
        self,
        report: RecoveryReport,
        topic: str,
        queue_id: int,
        queue_offset: int,
        phys: int,
        size: int,
        store_ts: int,
        properties: str,
    ) -> None:
        queue = self.queues.get_or_create(topic, queue_id)
        if queue_offset != queue.max_offset:
            if not queue.files and queue.max_offset == queue.min_offset:
                queue.reset_to(queue_offset)
            elif queue_offset < queue.max_offset:
                report.anomalies.append(
                    f"{topic}/{queue_id}: record at {phys} has queue offset {queue_offset}, "
                    f"already indexed; left out"
                )
                report.entries_dispatched -= 1
                return
            else:
                report.anomalies.append(
                    f"{topic}/{queue_id}: record at {phys} has queue offset {queue_offset}, "
                    f"queue ends at {queue.max_offset}; indexed at the end"
                )
        queue.append(phys, size, self._tags_code(topic, properties, store_ts))

    # ------------------------------------------------------------------ writes
    def _topic_bytes(self, topic: str) -> bytes:
        """Validate a topic not appended to before and remember its UTF-8 bytes."""
        encoded = topic.encode()
        validate_topic(topic)
        if len(encoded) > MAX_TOPIC_BYTES:
            raise MessageTooLargeError(f"topic {topic!r} is longer than {MAX_TOPIC_BYTES}")
        self._valid_topics[topic] = encoded
        return encoded

    def append(self, request: PutRequest) -> PutResult:
        """Append one message; durable only once :meth:`durable` for its end completes."""
        return self.append_batch((request,))[0]

    def append_batch(self, requests: Sequence[PutRequest]) -> list[PutResult]:
        """Append messages in order, under one lock acquisition; all are checked first."""
        # Per message only what differs between messages: the topic's bytes come from the
        # valid-topic cache, the head layout from RECORD_HEADS, the body CRC is taken here,
        # outside the lock, and the record is packed with positional arguments.
        topics = self._valid_topics
        heads = RECORD_HEADS[len(self._store_host)]
        max_bytes = self.settings.max_message_bytes
        prepared = []
        for request in requests:
            properties = request.properties.encode()
            topic = topics.get(request.topic)
            if topic is None:
                topic = self._topic_bytes(request.topic)
            if not 0 <= request.queue_id <= 0x7FFFFFFF:
                # a negative id's directory is not reloaded on restart; a larger one does not pack
                raise InvalidArgumentError(
                    f"queue id {request.queue_id} is not a non-negative int32"
                )
            head_bits = heads.get(len(request.born_host))
            if head_bits is None:
                raise InvalidArgumentError(
                    f"born host is {len(request.born_host)} bytes; a packed host is 8 or 20"
                )
            head, v6_bits = head_bits
            body = request.body
            size = head.size + len(body) + 3 + len(topic) + len(properties)
            if size > max_bytes or len(properties) > MAX_PROPERTIES_BYTES:
                raise MessageTooLargeError(
                    f"message to {request.topic} is {size} bytes stored (properties "
                    f"{len(properties)}); the limit is {max_bytes} "
                    f"(properties {MAX_PROPERTIES_BYTES})"
                )
            sys_flag = (request.sys_flag & ~HOST_V6_MASK) | v6_bits
            crc = crc32(body) & 0x7FFFFFFF  # codec.body_crc, without a Python call
            prepared.append((request, topic, properties, head, sys_flag, crc, size))
        results: list[PutResult] = []
        commitlog = self.commitlog
        store_host = self._store_host
        queues = self.queues.queues
        tag_code_of = self._tags_code
        lock = self._lock
        lock.acquire()  # not `with`: its __enter__/__exit__ lookups cost as much
        try:
            if self._closed:
                raise StoreClosedError(f"store {self.root} is closed")
            now_ms = time.time_ns() // 1_000_000
            for request, topic, properties, head, sys_flag, crc, size in prepared:
                queue = queues.get((request.topic, request.queue_id))
                if queue is None:
                    queue = self.queues.get_or_create(request.topic, request.queue_id)
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
                    store_host,
                    request.reconsume_times,
                    request.prepared_transaction_offset,
                    request.body,
                    topic,
                    properties,
                )
                commitlog.write_offset = phys + size
                queue.append(phys, size, tag_code_of(request.topic, request.properties, now_ms))
                # PutResult(...) without its Python-level __new__
                results.append(_new_tuple(PutResult, (phys, size, queue_offset, now_ms)))
        finally:
            lock.release()
        return results

    def durable(self, end_offset: int) -> Future[None]:
        """A future done when every byte below ``end_offset`` is on disk."""
        return self.group_commit.request(end_offset)

    def put(self, request: PutRequest, timeout_s: float | None = None) -> PutResult:
        """Append; under Sync flush return only after the covering fsync."""
        result = self.append(request)
        if self.settings.flush_mode is FlushMode.SYNC:
            self.durable(result.commit_log_offset + result.size).result(timeout_s)
        return result

    def put_batch(
        self, requests: Sequence[PutRequest], timeout_s: float | None = None
    ) -> list[PutResult]:
        results = self.append_batch(requests)
        if results and self.settings.flush_mode is FlushMode.SYNC:
            last = results[-1]
            self.durable(last.commit_log_offset + last.size).result(timeout_s)
        return results

    async def put_async(self, request: PutRequest) -> PutResult:
        """:meth:`put` for an event loop: the fsync wait does not block the loop."""
        result = self.append(request)
        if self.settings.flush_mode is FlushMode.SYNC:
            await asyncio.wrap_future(self.durable(result.commit_log_offset + result.size))
        return result

    # ------------------------------------------------------------------ reads
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        max_bytes: int = 256 * 1024,
        tag_codes: Container[int] | None = None,
    ) -> reads.GetResult:
        """Records of (topic, queue) from ``offset``; ``tag_codes`` filters by tag code."""
        with self._lock:
            self._ensure_open()
            return reads.get_messages(
                self.commitlog,
                self.queues.get(topic, queue_id),
                offset,
                max_count,
                max_bytes,
                tag_codes,
            )

    def read_message(self, commit_log_offset: int) -> bytes | None:
        """The whole record at a commit-log offset, or None if none starts there."""
        with self._lock:
            self._ensure_open()
            header = self.commitlog.header(commit_log_offset)
            if header is None or header[1] != MESSAGE_MAGIC_CODE or header[0] <= 0:
                return None
            return self.commitlog.read(commit_log_offset, header[0])

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[Entry]:
        """Raw consume-queue entries (commit-log offset, size, tag code) from ``offset``."""
        with self._lock:
            queue = self.queues.get(topic, queue_id)
            return [] if queue is None else queue.entries(offset, max_count)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return 0 if queue is None else queue.min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return 0 if queue is None else queue.max_offset

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        with self._lock:
            return reads.offset_by_time(
                self.commitlog, self.queues.get(topic, queue_id), timestamp_ms
            )

    def queue_ids(self, topic: str) -> list[int]:
        return [queue.queue_id for queue in self.queues.of_topic(topic)]

    def delete_topic(self, topic: str) -> int:
        """Drop the consume queues of ``topic`` (its records age out with the log)."""
        with self._lock:
            count = self.queues.delete_topic(topic)
            self._valid_topics.pop(topic, None)
        self.write_checkpoint(clean=False)
        return count

    # ------------------------------------------------------------------ maintenance
    def flush_commit_log(self) -> None:
        """fsync the commit log up to the current write position and release waiters."""
        with self._lock:
            target = self.commitlog.write_offset
            start = self.group_commit.flushed
            segments = [s for s in self.commitlog.segments if s.end > start and s.start < target]
        if target <= start:
            return
        try:
            for segment in segments:
                segment.flush()
        except OSError as exc:
            log.exception("flushing the commit log of %s failed", self.root)
            self.group_commit.fail(exc)
            return
        self.group_commit.advance(target)

    def write_checkpoint(self, *, clean: bool) -> None:
        """Flush log and queues, then record where recovery may start."""
        with self._lock:
            target = self.commitlog.write_offset
            queues = list(self.queues)
        if not clean and self._checkpointed == target:
            return  # nothing appended since the last checkpoint
        self.flush_commit_log()
        for queue in queues:
            if queue.flushed_offset != queue.max_offset:
                queue.flush()
        Checkpoint(target, clean, int(time.time() * 1000)).save(self._checkpoint_path)
        self._checkpointed = target

    def persist_tables(self, *, force: bool = False) -> None:
        self.consumer_offsets.persist(force=force)
        self.schedule_offsets.persist(force=force)

    def run_retention(self, now_s: float | None = None) -> int:
        """Delete whole commit-log segments older than the retention; returns how many."""
        now_s = time.time() if now_s is None else now_s
        limit_s = self.settings.retention_hours * 3600
        deleted = 0
        with self._lock:
            while len(self.commitlog.segments) > 1:
                first = self.commitlog.segments[0]
                if first.end > self.commitlog.write_offset:
                    break
                if now_s - first.path.stat().st_mtime < limit_s:
                    break
                self.commitlog.drop_first().delete()
                deleted += 1
            if deleted:
                for queue in self.queues:
                    queue.drop_files_below(self.commitlog.min_offset)
                log.info("retention removed %d commit-log segments from %s", deleted, self.root)
        return deleted

    def flush(self) -> None:
        """Make everything durable now: log, queues, checkpoint and offset tables."""
        self.write_checkpoint(clean=False)
        self.persist_tables()

    @property
    def size_bytes(self) -> int:
        """Bytes of commit log currently kept (from the oldest segment to the write position)."""
        return self.commitlog.write_offset - self.commitlog.min_offset

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")

    def close(self) -> None:
        """Flush everything, mark the shutdown clean and release the directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._background is not None:
            self._background.stop()
        self.write_checkpoint(clean=True)
        self.persist_tables()
        self.group_commit.close()
        with self._lock:
            self.queues.close()
            self.commitlog.close()
        os.close(self._lock_fd)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lock_directory(root: Path) -> int:
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise StoreError(f"store directory {root} is in use by another process") from exc
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
