"""Replication at the store level: a replica's commit log holds its master's bytes at the same
offsets, and the replica indexes its own consume queues from them.

The master hands out its log as it is (:func:`read_log`): a contiguous range below its write
position within one segment, with no framing of its own. Any split of that stream is fine; the
replica (:class:`LogReplica`) writes only whole records into its mapped log and keeps a partial
one in memory until the rest arrives, so its write position is always at a record boundary and
a crash of the replica leaves nothing recovery has to cut. Each record is checked as recovery
checks it (magic, lengths, body CRC, its own physical offset) before it is written, so bytes
that are not the master's log (a peer speaking garbage, a gap, a wrong position) raise
:class:`ReplicationError` and change nothing.

Offsets are the same on both sides because the segment size is: the master refuses the
handshake of a replica whose segments differ (:mod:`reconsume.broker.replication`). A replica
whose log diverged from its master's (it was master itself and wrote a tail nobody
acknowledged) is cut back with :meth:`LogReplica.truncate` to the point the epochs say both agree on
(:mod:`reconsume.store.epochs`); the tail is set aside in ``quarantine/``, as recovery does.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconsume.errors import CodecError, ReplicationError
from reconsume.message.codec import BLANK_MAGIC_CODE
from reconsume.store.commitlog import CommitLog
from reconsume.store.consume_queue import ConsumeQueue
from reconsume.store.mapped_file import MappedFile
from reconsume.store.queue_table import QueueTable
from reconsume.store.recovery import RecoveryReport, checked_routing, cut_tail, trim_queues
from reconsume.store.requests import TagsCode

_SIZE_MAGIC = struct.Struct(">ii")

Appended = dict[tuple[str, int], list[int]]
"""Tag codes of the records an :meth:`LogReplica.apply` indexed, by (topic, queue id)."""
_Written = tuple[ConsumeQueue, int, int, int, str]
"""A record in the log, not indexed yet: its queue, end offset, size, store time and
properties."""


def read_log(commitlog: CommitLog, offset: int, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of the log from ``offset``, within one segment and below the write
    position (empty when ``offset`` is the write position). The caller holds the store lock.

    Raises :class:`ReplicationError` for an offset outside the log: below its first segment
    (retention removed it; the replica must start again from :attr:`CommitLog.min_offset`) or
    past its end (the replica holds bytes this log does not: it has to be cut back first)."""
    end = commitlog.write_offset
    if offset == end:
        return b""
    segment = commitlog.segment_at(offset)
    if segment is None or offset > end:
        raise ReplicationError(
            f"offset {offset} is outside the log [{commitlog.min_offset}, {end})"
        )
    stop = min(end, segment.end, offset + max_bytes)
    return bytes(segment.mm[offset - segment.start : stop - segment.start])


class LogReplica:
    """Applies the master's log to this store's commit log and consume queues."""

    def __init__(
        self,
        commitlog: CommitLog,
        queues: QueueTable,
        lock: threading.RLock,
        *,
        tags_code: TagsCode,
        max_record_bytes: int,
        quarantine_dir: Path,
        rewound: Callable[[int], None],
    ) -> None:
        self._commitlog = commitlog
        self._queues = queues
        self._lock = lock
        self._tags_code = tags_code
        self._max_record_bytes = max_record_bytes
        self._quarantine_dir = quarantine_dir
        self._rewound = rewound
        self._pending = bytearray()
        """The start of a record whose end has not arrived yet (at the write position)."""

    @property
    def received_offset(self) -> int:
        """Where the next replicated byte goes: the write position plus a partial record."""
        return self._commitlog.write_offset + len(self._pending)

    def restart_stream(self) -> int:
        """Forget a partial record (its connection is gone) and return where the next stream
        must start: the write position."""
        with self._lock:
            self._pending.clear()
            return self._commitlog.write_offset

    def apply(
        self, offset: int, data: bytes, *, written: Callable[[], None] | None = None
    ) -> Appended:
        """Append the master's bytes that start at ``offset``; returns the tag codes appended
        per (topic, queue id), for long polling to wake held pulls.

        ``offset`` must be where this log ends (:attr:`received_offset`). Whole records are
        written and indexed; a record cut by the end of ``data`` waits for the next call.
        ``written`` is called once the records are in the log and before they are indexed:
        a replica acknowledges from there, since what counts as stored is the log (recovery
        indexes a log whose consume queues fell behind) — the indexing is off the path a Sync
        write waits on, as Apache RocketMQ's slave dispatches after reporting its offset."""
        with self._lock:
            expected = self.received_offset
            if offset != expected:
                raise ReplicationError(
                    f"replicated bytes start at offset {offset}, this log continues at {expected}"
                )
            buffer = bytes(self._pending) + data if self._pending else data
            records: list[_Written] = []
            try:
                used = self._write_records(buffer, records)
            except ReplicationError:
                # the records before the bad one are written; the peer resumes after them
                self._pending.clear()
                self._index(records)
                raise
            self._pending = bytearray(buffer[used:])
            if written is not None:
                written()
            return self._index(records)

    def _index(self, records: list[_Written]) -> Appended:
        appended: Appended = {}
        tags_code = self._tags_code
        for queue, end, total, store_ts, properties in records:
            tag_code = tags_code(queue.topic, properties, store_ts)
            queue.append(end - total, total, tag_code)
            appended.setdefault((queue.topic, queue.queue_id), []).append(tag_code)
        return appended

    def _write_records(self, buffer: bytes, records: list[_Written]) -> int:
        """Write the whole records at the start of ``buffer`` to the log, checked as recovery
        checks them and against the queue offsets they continue, and list them in ``records``
        for indexing; returns the bytes used."""
        commitlog = self._commitlog
        pos = commitlog.write_offset
        used = 0
        limit = len(buffer)
        view = memoryview(buffer)
        following: dict[tuple[str, int], list[Any]] = {}
        """(topic, queue id) → [its queue, the queue offset its next record must have]."""
        segment: MappedFile | None = None
        while limit - used >= 8:
            if segment is None or pos >= segment.end:
                segment = commitlog.segment_at(pos) or commitlog.ensure_segment(pos)
            local = pos - segment.start
            room = segment.size - local
            total, magic = _SIZE_MAGIC.unpack_from(buffer, used)
            if magic == BLANK_MAGIC_CODE:
                # The rest of the segment: its 8-byte head, then zeros.
                if total != room:
                    raise ReplicationError(
                        f"blank record at offset {pos} is {total} bytes; its segment has {room}"
                    )
                if limit - used < total:
                    break
                if buffer[used + 8 : used + total].count(0) != total - 8:
                    raise ReplicationError(f"blank record at offset {pos} is not zero-filled")
                segment.mm[local : local + 8] = view[used : used + 8]
                used += total
                pos = segment.end
                commitlog.write_offset = pos
                continue
            if total <= 0 or total > self._max_record_bytes or total + 8 > room:
                raise ReplicationError(
                    f"record at offset {pos} claims {total} bytes (segment room {room}, "
                    f"largest record {self._max_record_bytes})"
                )
            if limit - used < total:
                break
            end = used + total
            try:
                _size, topic, queue_id, queue_offset, store_ts, properties = checked_routing(
                    buffer, used, end, pos
                )
            except CodecError as exc:
                raise ReplicationError(f"replicated record at offset {pos}: {exc}") from exc
            follows = following.get((topic, queue_id))
            if follows is None:
                queue = self._queues.get_or_create(topic, queue_id)
                if queue_offset != queue.max_offset:
                    if queue.files or queue.max_offset != queue.min_offset:
                        raise ReplicationError(
                            f"record at offset {pos} has queue offset {queue_offset} in "
                            f"{topic}/{queue_id}, which continues at {queue.max_offset}"
                        )
                    queue.reset_to(queue_offset)
                follows = following[(topic, queue_id)] = [queue, queue_offset]
            elif queue_offset != follows[1]:
                raise ReplicationError(
                    f"record at offset {pos} has queue offset {queue_offset} in "
                    f"{topic}/{queue_id}, which continues at {follows[1]}"
                )
            follows[1] = queue_offset + 1
            segment.mm[local : local + total] = view[used:end]
            pos += total
            commitlog.write_offset = pos
            records.append((follows[0], pos, total, store_ts, properties))
            used = end
        return used

    def truncate(self, offset: int, reason: str) -> RecoveryReport:
        """Cut this log back to ``offset`` (a record boundary), setting the cut bytes aside in
        ``quarantine/``; consume-queue entries at or past it go too. For a replica whose tail
        its new master never had: nothing in that tail was acknowledged by both."""
        report = RecoveryReport()
        with self._lock:
            commitlog = self._commitlog
            if not commitlog.min_offset <= offset <= commitlog.write_offset:
                raise ReplicationError(
                    f"cannot cut the log back to {offset}: it holds "
                    f"[{commitlog.min_offset}, {commitlog.write_offset})"
                )
            self._pending.clear()
            report.scan_start = offset
            report.entries_dropped = trim_queues(commitlog, self._queues, offset)
            quarantine = self._quarantine_dir
            cut_tail(commitlog, offset, reason, self._max_record_bytes, quarantine, report)
            commitlog.write_offset = offset
            report.end_offset = offset
        self._rewound(offset)
        return report

    def restart_at(self, offset: int) -> RecoveryReport:
        """Start an empty or hopelessly behind replica over at the master's first offset: the
        whole log is set aside and the next segment starts at ``offset``."""
        report = self.truncate(self._commitlog.min_offset, f"starting over at offset {offset}")
        with self._lock:
            for topic in sorted(self._queues.topics()):
                self._queues.delete_topic(topic)
            self._commitlog.restart_at(offset)
        self._rewound(offset)
        report.end_offset = offset
        return report
