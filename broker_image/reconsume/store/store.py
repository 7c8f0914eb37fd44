"""The message store of one broker: commit log, consume queues, tables, recovery, flushing.

Appends are serialised by one lock and written straight into the mapped commit log, then
indexed in the consume queue of (topic, queue) in the same critical section
(:mod:`reconsume.store.appends`). Durability is separate (:mod:`reconsume.store.durability`):
under Sync flush a put waits for the group commit that covers it; under Async a background
thread fsyncs periodically. Reads return copies of whole records.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Container
from concurrent.futures import Future
from pathlib import Path

from reconsume.errors import StoreClosedError
from reconsume.message.address import HostAddress
from reconsume.message.codec import MESSAGE_MAGIC_CODE, RECORD_HEADS
from reconsume.store import reads
from reconsume.store.acked import AckedTable
from reconsume.store.appends import Appends
from reconsume.store.atomic import lock_directory
from reconsume.store.checkpoint import Checkpoint
from reconsume.store.commitlog import CommitLog
from reconsume.store.consume_queue import Entry
from reconsume.store.durability import Durability
from reconsume.store.epochs import EpochHistory
from reconsume.store.maintenance import Background
from reconsume.store.queue_table import QueueTable
from reconsume.store.recovery import recover_store
from reconsume.store.replication import LogReplica, read_log
from reconsume.store.requests import TagsCode, default_tags_code
from reconsume.store.retention import delete_expired_segments
from reconsume.store.settings import StoreSettings
from reconsume.store.tables import OffsetTable, group_table, topic_table

log = logging.getLogger(__name__)

_LOOPBACK = HostAddress(b"\x7f\x00\x00\x01", 10911)


class MessageStore(Appends):
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
        self._lock_fd = lock_directory(self.root)
        self._lock = threading.RLock()
        self._closed = False
        self.store_host = store_host
        self._store_host = store_host.packed()
        self._heads = RECORD_HEADS[len(self._store_host)]
        self._tags_code = tags_code
        self._valid_topics: dict[str, bytes] = {}
        """Topics appended to (validated), with their UTF-8 bytes."""
        self.is_replica = False
        """Set while the broker follows a master: the log grows only by :attr:`replica`."""
        self.replicated: Callable[[int], Future[None]] | None = None
        """Set by a master with Sync replication: when an offset counts as on its replicas."""
        self.writable_until: float | None = None
        """A master's lease: no append after this ``time.monotonic()`` (None: no lease)."""
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
        self.acked = AckedTable(config / "ackedOffsets.json")
        checkpoint_path = self.root / "checkpoint"
        self.recovery = recover_store(
            self.commitlog,
            self.queues,
            Checkpoint.load(checkpoint_path),
            tags_code=self._tags_code,
            max_record_bytes=s.max_message_bytes,
            quarantine_dir=self.root / "quarantine",
        )
        log.info("store %s: %s", self.root, self.recovery.summary())
        self.durability = Durability(self.commitlog, self.queues, self._lock, checkpoint_path)
        self.group_commit = self.durability.group_commit
        self.durability.write_checkpoint(clean=False)
        self.epochs = EpochHistory(self.root / "epochs.json")
        self.replica = LogReplica(
            self.commitlog,
            self.queues,
            self._lock,
            tags_code=self._tags_code,
            max_record_bytes=s.max_message_bytes,
            quarantine_dir=self.root / "quarantine",
            rewound=self.durability.rewind,
        )
        self._background = Background(self) if background else None
        if self._background is not None:
            self._background.start()

    # ------------------------------------------------------------------ reads
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        max_bytes: int = 256 * 1024,
        tag_codes: Container[int] | None = None,
        log_limit: int | None = None,
    ) -> reads.GetResult:
        """Records of (topic, queue) from ``offset``; ``tag_codes`` filters by tag code,
        ``log_limit`` hides records that end past that commit-log offset."""
        with self._lock:
            self._ensure_open()
            queue = self.queues.get(topic, queue_id)
            return reads.get_messages(
                self.commitlog, queue, offset, max_count, max_bytes, tag_codes, log_limit
            )

    def read_message(self, commit_log_offset: int) -> bytes | None:
        """The whole record at a commit-log offset, or None if none starts there."""
        with self._lock:
            self._ensure_open()
            header = self.commitlog.header(commit_log_offset)
            if header is None or header[1] != MESSAGE_MAGIC_CODE or header[0] <= 0:
                return None
            return self.commitlog.read(commit_log_offset, header[0])

    def read_log(self, offset: int, max_bytes: int) -> bytes:
        """The commit log's bytes from ``offset`` as they are, for a replica (see
        :func:`reconsume.store.replication.read_log`)."""
        with self._lock:
            self._ensure_open()
            return read_log(self.commitlog, offset, max_bytes)

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[Entry]:
        """Raw consume-queue entries (commit-log offset, size, tag code) from ``offset``."""
        with self._lock:
            queue = self.queues.get(topic, queue_id)
            return [] if queue is None else queue.entries(offset, max_count)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return 0 if queue is None else queue.min_offset

    def max_offset(self, topic: str, queue_id: int, log_limit: int | None = None) -> int:
        """The queue's max offset; with ``log_limit``, counting only the records that end at
        or below it."""
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            return 0
        if log_limit is None:
            return queue.max_offset
        with self._lock:
            return reads.visible_max(self.commitlog, queue, log_limit)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        with self._lock:
            queue = self.queues.get(topic, queue_id)
            return reads.offset_by_time(self.commitlog, queue, timestamp_ms)

    def queue_ids(self, topic: str) -> list[int]:
        return [queue.queue_id for queue in self.queues.of_topic(topic)]

    def delete_topic(self, topic: str) -> int:
        """Drop the consume queues of ``topic`` (its records age out with the log)."""
        with self._lock:
            count = self.queues.delete_topic(topic)
            self._valid_topics.pop(topic, None)
        self.durability.write_checkpoint(clean=False)  # recovery must not re-index it
        return count

    # ------------------------------------------------------------------ maintenance
    def flush_commit_log(self) -> None:
        """fsync the commit log up to the current write position and release waiters."""
        self.durability.flush_commit_log()

    def write_checkpoint(self, *, clean: bool) -> None:
        """Flush log and queues, then record where recovery may start."""
        self.durability.write_checkpoint(clean=clean)

    def persist_tables(self, *, force: bool = False) -> None:
        self.consumer_offsets.persist(force=force)
        self.schedule_offsets.persist(force=force)

    def run_retention(self, now_s: float | None = None) -> int:
        """Delete whole commit-log segments older than the retention; returns how many."""
        return delete_expired_segments(
            self.commitlog,
            self.queues,
            self._lock,
            self.settings.retention_hours * 3600,
            time.time() if now_s is None else now_s,
        )

    def flush(self) -> None:
        """Make everything durable now: log, queues, checkpoint and offset tables."""
        self.durability.write_checkpoint(clean=False)
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
        self.durability.write_checkpoint(clean=True)
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
