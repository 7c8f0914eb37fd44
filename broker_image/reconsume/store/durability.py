"""Flushing the commit log, group commit and checkpoints — and failing safely.

A failed fsync makes the store read-only for good: on Linux a failed ``fdatasync`` may drop
the dirty pages it could not write and report success next time, so a later "successful"
flush proves nothing about the bytes before it. Appends then raise :class:`StoreError` and
every waiter fails; the broker reports it and an operator restarts on healthy storage, where
recovery keeps what reached the disk.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from reconsume.errors import StoreError
from reconsume.store.checkpoint import Checkpoint
from reconsume.store.commitlog import CommitLog
from reconsume.store.flush import GroupCommit
from reconsume.store.queue_table import QueueTable

log = logging.getLogger(__name__)


class Durability:
    def __init__(
        self,
        commitlog: CommitLog,
        queues: QueueTable,
        lock: threading.RLock,
        checkpoint_path: Path,
    ) -> None:
        self._commitlog = commitlog
        self._queues = queues
        self._lock = lock
        self._checkpoint_path = checkpoint_path
        self._checkpoint_lock = threading.Lock()
        self._checkpointed = -1
        self.group_commit = GroupCommit(commitlog.write_offset)
        self.failure: StoreError | None = None
        """Set once a flush failed; the store accepts no more appends."""

    def check_writable(self) -> None:
        if self.failure is not None:
            raise self.failure

    def flush_commit_log(self) -> None:
        """fsync the commit log up to the current write position and release its waiters."""
        with self._lock:
            target = self._commitlog.write_offset
            start = self.group_commit.flushed
            segments = [s for s in self._commitlog.segments if s.end > start and s.start < target]
        if target <= start or self.failure is not None:
            return
        try:
            for segment in segments:
                segment.flush()
        except OSError as exc:
            log.exception("flushing the commit log failed; the store is now read-only")
            self.failure = StoreError(
                f"the store is read-only: flushing the commit log failed ({exc}); "
                "restart the broker on healthy storage"
            )
            self.group_commit.fail(self.failure)
            return
        self.group_commit.advance(target)

    def write_checkpoint(self, *, clean: bool) -> None:
        """Flush log and queues, then record where recovery may start.

        Serialised, and never moves backwards: a slow background checkpoint must not
        overwrite a newer one (e.g. the one taken right after a topic was deleted).
        """
        with self._checkpoint_lock:
            with self._lock:
                target = self._commitlog.write_offset
                queues = list(self._queues)
            if target < self._checkpointed or (not clean and target == self._checkpointed):
                return
            self.flush_commit_log()
            if self.failure is not None:
                return
            for queue in queues:
                if queue.flushed_offset != queue.max_offset:
                    queue.flush()
            Checkpoint(target, clean, int(time.time() * 1000)).save(self._checkpoint_path)
            self._checkpointed = target

    def rewind(self, offset: int) -> None:
        """After the log was cut back to ``offset``: the durable offset and the checkpoint
        follow it down (the checkpoint otherwise never moves backwards)."""
        self.group_commit.rewind(offset)
        with self._checkpoint_lock:
            self._checkpointed = -1
        self.write_checkpoint(clean=False)
