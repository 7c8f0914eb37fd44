"""Retention: whole commit-log segments older than the retention period are deleted."""

from __future__ import annotations

import logging
import threading

from reconsume.store.commitlog import CommitLog
from reconsume.store.queue_table import QueueTable

log = logging.getLogger(__name__)


def delete_expired_segments(
    commitlog: CommitLog,
    queues: QueueTable,
    lock: threading.RLock,
    retention_s: float,
    now_s: float,
) -> int:
    """Delete segments whose last write (mtime) is older than ``retention_s``; never the one
    being written. Consume queues then drop files and move their min offsets past what is
    gone. Returns the number of segments deleted."""
    deleted = 0
    with lock:
        while len(commitlog.segments) > 1:
            first = commitlog.segments[0]
            if first.end > commitlog.write_offset:
                break
            if now_s - first.path.stat().st_mtime < retention_s:
                break
            commitlog.drop_first().delete()
            deleted += 1
        if deleted:
            for queue in queues:
                queue.drop_files_below(commitlog.min_offset)
            log.info("retention removed %d commit-log segments", deleted)
    return deleted
