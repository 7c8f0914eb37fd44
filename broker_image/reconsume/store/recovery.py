"""Recovery on open: find the true end of the commit log and bring consume queues to it.

1. Consume queues lose every tail entry that points at or past the scan start, or that does
   not match the record it points at (a torn entry).
2. The commit log is scanned record by record from the checkpoint (or from its first byte
   without one): magic, lengths and body CRC are verified and each record is re-dispatched.
3. The first record that fails ends the log. Bytes past it that are not zero are copied to
   ``quarantine/`` before they are cleared, and later segment files are moved there whole,
   so recovery never destroys data a person might still want.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reconsume.errors import CodecError
from reconsume.message.codec import (
    BLANK_MAGIC_CODE,
    OFF_QUEUE_ID,
    OFF_QUEUE_OFFSET,
    ReadableBuffer,
)
from reconsume.message.decode import check_routing
from reconsume.store.atomic import fsync_directory
from reconsume.store.checkpoint import Checkpoint
from reconsume.store.commitlog import CommitLog
from reconsume.store.consume_queue import ConsumeQueue
from reconsume.store.mapped_file import MappedFile
from reconsume.store.queue_table import QueueTable
from reconsume.store.requests import TagsCode

log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CHUNK = 1 << 20

Dispatch = Callable[[str, int, int, int, int, int, str], None]
"""(topic, queue id, queue offset, commit-log offset, size, store timestamp, properties)."""


@dataclass(slots=True)
class RecoveryReport:
    """What recovery found and did; logged by the store and kept as ``store.recovery``."""

    clean_shutdown: bool = False
    checkpoint_offset: int | None = None
    scan_start: int = 0
    end_offset: int = 0
    records_scanned: int = 0
    bytes_scanned: int = 0
    entries_dispatched: int = 0
    entries_dropped: int = 0
    truncated_at: int | None = None
    truncated_reason: str | None = None
    truncated_bytes: int = 0
    quarantined: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        text = (
            f"recovered commit log to offset {self.end_offset} in {self.seconds:.3f}s: "
            f"scanned {self.records_scanned} records ({self.bytes_scanned} bytes) from "
            f"{self.scan_start}, {self.entries_dispatched} queue entries rebuilt, "
            f"{self.entries_dropped} dropped"
        )
        if self.truncated_at is not None:
            text += (
                f"; truncated at {self.truncated_at} ({self.truncated_reason}), "
                f"{self.truncated_bytes} non-zero bytes quarantined"
            )
        return text


def _entry_matches(commitlog: CommitLog, queue: ConsumeQueue, index: int) -> bool:
    entry = queue.entry(index)
    if entry is None:
        return False
    phys, size, _tag = entry
    header = commitlog.header(phys)
    if header is None or header[0] != size or size <= 0:
        return False
    raw = commitlog.read(phys, 28)
    if raw is None:
        return False
    return bool(
        _I32.unpack_from(raw, OFF_QUEUE_ID)[0] == queue.queue_id
        and _I64.unpack_from(raw, OFF_QUEUE_OFFSET)[0] == index
    )


def trim_queues(commitlog: CommitLog, queues: QueueTable, scan_start: int) -> int:
    """Drop consume-queue tail entries at/after ``scan_start`` or not matching the log."""
    dropped = 0
    for queue in queues:
        index = queue.max_offset
        while index > queue.min_offset:
            entry = queue.entry(index - 1)
            if (
                entry is not None
                and entry[0] < scan_start
                # below the log's first segment: aged out by retention, nothing to check
                and (entry[0] < commitlog.min_offset or _entry_matches(commitlog, queue, index - 1))
            ):
                break
            index -= 1
        if index < queue.max_offset:
            dropped += queue.truncate(index)
    return dropped


def checked_routing(
    buf: ReadableBuffer, local: int, limit: int, pos: int, *, verify_crc: bool = True
) -> tuple[int, str, int, int, int, str]:
    """The record at ``buf[local:limit]`` (commit-log offset ``pos``) checked as
    :func:`~reconsume.message.decode.check_routing` checks it, rejecting too the header fields
    the body CRC does not cover that would misplace it: a topic that is no file name, a
    negative queue id, a wrong physical offset. Returns (size, topic, queueId, queueOffset,
    storeTimestamp, properties)."""
    total, topic, queue_id, queue_offset, physical, store_ts, properties = check_routing(
        buf, local, limit, verify_crc=verify_crc
    )
    if not topic or topic in (".", "..") or "/" in topic or "\x00" in topic:
        raise CodecError(f"record at {local}: topic {topic!r} is not a topic name")
    if queue_id < 0 or physical != pos:
        raise CodecError(
            f"record at {local}: queue id {queue_id}, physical offset {physical} (expected {pos})"
        )
    return total, topic, queue_id, queue_offset, store_ts, properties


def _last_nonzero(segment: MappedFile, start: int, stop: int) -> int:
    """One past the last non-zero byte in ``segment.mm[start:stop]``, or ``start``."""
    end = stop
    while end > start:
        begin = max(start, end - _CHUNK)
        chunk = segment.mm[begin:end].rstrip(b"\x00")
        if chunk:
            return begin + len(chunk)
        end = begin
    return start


def _unused(path: Path) -> Path:
    """``path``, or ``path.1``, ``path.2``... when taken: quarantine never overwrites."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def _quarantine(directory: Path, name: str, data: bytes) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = _unused(directory / name)
    with open(path, "xb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    fsync_directory(directory)
    return str(path)


def recover_commit_log(
    commitlog: CommitLog,
    queues: QueueTable,
    *,
    scan_start: int,
    dispatch: Dispatch,
    verify_crc: bool,
    max_record_bytes: int,
    quarantine_dir: Path,
    report: RecoveryReport,
) -> None:
    """Scan from ``scan_start`` (a record boundary) to the end of the log; see module doc."""
    started = time.perf_counter()
    report.scan_start = scan_start
    commitlog.write_offset = scan_start  # records below it are readable while queues are trimmed
    report.entries_dropped = trim_queues(commitlog, queues, scan_start)
    for queue in queues:  # min offsets follow retention across restarts too
        queue.drop_files_below(commitlog.min_offset)
    pos = scan_start
    reason: str | None = None
    while True:
        segment = commitlog.segment_at(pos) or commitlog.ensure_segment(pos)
        local = pos - segment.start
        if segment.size - local < 8:
            reason = f"record at offset {pos} leaves no room for the segment's closing blank"
            break
        total, magic = _SIZE_MAGIC.unpack_from(segment.mm, local)
        if total == 0:
            break
        if magic == BLANK_MAGIC_CODE and total == segment.size - local:
            report.bytes_scanned += total
            pos = segment.end
            continue
        try:
            size, topic, queue_id, queue_offset, store_ts, properties = checked_routing(
                segment.mm, local, segment.size, pos, verify_crc=verify_crc
            )
        except CodecError as exc:
            reason = str(exc).replace(f"record at {local}", f"record at offset {pos}")
            break
        dispatch(topic, queue_id, queue_offset, pos, size, store_ts, properties)
        report.records_scanned += 1
        report.entries_dispatched += 1
        report.bytes_scanned += size
        pos += size
    cut_tail(commitlog, pos, reason, max_record_bytes, quarantine_dir, report)
    commitlog.write_offset = pos
    report.end_offset = pos
    report.seconds = time.perf_counter() - started


def cut_tail(
    commitlog: CommitLog,
    pos: int,
    reason: str | None,
    max_record_bytes: int,
    quarantine_dir: Path,
    report: RecoveryReport,
) -> None:
    """Clear (after quarantining) whatever follows the last valid record at ``pos``: with a
    ``reason``, everything to the end of its segment and every later segment."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    segment = commitlog.segment_at(pos) or commitlog.ensure_segment(pos)
    local = pos - segment.start
    # A crash mid-append leaves at most one partial record; corruption may reach further.
    stop = segment.size if reason else min(segment.size, local + max_record_bytes + 8)
    end = _last_nonzero(segment, local, stop)
    if end > local:
        data = segment.mm[local:end]
        report.quarantined.append(
            _quarantine(quarantine_dir, f"commitlog-{pos:020d}-{stamp}.bin", data)
        )
        segment.mm[local:end] = bytes(end - local)
        segment.flush()
        report.truncated_bytes += end - local
        reason = reason or "partial record after the last complete one"
    for later in commitlog.drop_after(segment.start):
        if later.mm[:8] == bytes(8):
            later.delete()
            continue
        later.close()
        quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = _unused(quarantine_dir / f"commitlog-segment-{later.path.name}-{stamp}")
        os.replace(later.path, target)
        fsync_directory(later.path.parent)
        report.quarantined.append(str(target))
        reason = reason or f"segment {later.path.name} follows the end of the log"
    if reason:
        report.truncated_at = pos
        report.truncated_reason = reason
        log.warning(
            "commit log truncated at offset %d: %s; set aside: %s",
            pos,
            reason,
            report.quarantined or "nothing (the tail was zero)",
        )


def recover_store(
    commitlog: CommitLog,
    queues: QueueTable,
    checkpoint: Checkpoint | None,
    *,
    tags_code: TagsCode,
    max_record_bytes: int,
    quarantine_dir: Path,
) -> RecoveryReport:
    """Recover from ``checkpoint`` (or the log's start), re-indexing with ``tags_code``."""
    report = RecoveryReport()
    start = commitlog.min_offset
    if checkpoint is not None:
        report.clean_shutdown = checkpoint.clean_shutdown
        report.checkpoint_offset = checkpoint.commit_log_offset
        if start <= checkpoint.commit_log_offset <= commitlog.active.end:
            start = checkpoint.commit_log_offset

    def dispatch(
        topic: str,
        queue_id: int,
        queue_offset: int,
        phys: int,
        size: int,
        store_ts: int,
        properties: str,
    ) -> None:
        queue = queues.get_or_create(topic, queue_id)
        if queue_offset != queue.max_offset:
            if not queue.files and queue.max_offset == queue.min_offset:
                queue.reset_to(queue_offset)
            elif queue_offset < queue.max_offset:
                report.anomalies.append(
                    f"{topic}/{queue_id}: record at {phys} has queue offset {queue_offset}, "
                    "already indexed; left out"
                )
                report.entries_dispatched -= 1
                return
            else:
                report.anomalies.append(
                    f"{topic}/{queue_id}: record at {phys} has queue offset {queue_offset}, "
                    f"queue ends at {queue.max_offset}; indexed at the end"
                )
        queue.append(phys, size, tags_code(topic, properties, store_ts))

    recover_commit_log(
        commitlog,
        queues,
        scan_start=start,
        dispatch=dispatch,
        verify_crc=True,
        max_record_bytes=max_record_bytes,
        quarantine_dir=quarantine_dir,
        report=report,
    )
    return report
