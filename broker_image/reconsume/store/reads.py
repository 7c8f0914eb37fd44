"""Reading messages through consume queues (what a pull needs) and by time."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Container
from dataclasses import dataclass, field
from enum import Enum

from reconsume.message.codec import MESSAGE_MAGIC_CODE, OFF_SYS_FLAG, store_timestamp_offset
from reconsume.store.commitlog import CommitLog
from reconsume.store.consume_queue import ConsumeQueue

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MIN_SCAN_ENTRIES = 800
"""Entries a read may step over (filtered out or already deleted) before it returns."""


class GetStatus(Enum):
    """Outcome of a read, with RocketMQ's ``GetMessageStatus`` meanings."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    """Entries were there but the tag filter matched none of those scanned."""
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    """Entries point below the commit log's minimum (retention removed them)."""
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    """The offset equals the max offset: nothing new yet (a long poll waits here)."""
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """Records (V1 bytes, ready for a pull response) and where the next read starts."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    total_bytes: int = 0


def visible_max(commitlog: CommitLog, queue: ConsumeQueue, log_limit: int | None) -> int:
    """The queue's max offset counting only entries whose record ends at or below
    ``log_limit`` (None: every entry). A queue's records lie in commit-log order, so the
    hidden entries are a tail, found by bisection."""
    hi = queue.max_offset
    if log_limit is None or log_limit >= commitlog.write_offset:
        return hi
    lo = queue.min_offset
    while lo < hi:
        mid = (lo + hi) // 2
        entry = queue.entry(mid)
        if entry is None or entry[0] + entry[1] > log_limit:
            hi = mid
        else:
            lo = mid + 1
    return lo


def get_messages(
    commitlog: CommitLog,
    queue: ConsumeQueue | None,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_codes: Container[int] | None,
    log_limit: int | None = None,
) -> GetResult:
    """Read up to ``max_count`` records (and about ``max_bytes``) from ``offset``, none whose
    record ends past the commit-log offset ``log_limit``: those read as not there yet, and
    an offset among them reads as the end of the queue (a consumer waits there, it is not
    moved)."""
    if queue is None:
        return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    lo, written = queue.min_offset, queue.max_offset
    hi = visible_max(commitlog, queue, log_limit)
    if written == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if hi <= offset <= written:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
    result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, lo, hi)
    records, queue_offsets = result.records, result.queue_offsets
    total = found = 0
    budget = max(MIN_SCAN_ENTRIES, max_count)
    log_min = commitlog.min_offset
    # The readable span of the last record's segment (CommitLog.readable_span): a pull's
    # records mostly lie in one segment, so most need neither a bisection nor a call.
    seg_start = seg_end = -1
    mapping: mmap.mmap | bytes = b""
    index = offset
    removed = 0
    while index < hi and budget > 0 and found < max_count:
        batch = queue.entries(index, min(budget, hi - index))
        if not batch:
            break
        for phys, size, tag in batch:
            if found >= max_count or (found and total + size > max_bytes):
                budget = 0
                break
            budget -= 1
            current = index
            index += 1
            if phys < log_min:
                removed += 1
                continue
            if tag_codes is not None and tag not in tag_codes:
                continue
            end = phys + size
            if phys < seg_start or end > seg_end:
                span = commitlog.readable_span(phys)
                if span is None or end > span[1]:  # gone, or not all of it readable
                    removed += 1
                    continue
                seg_start, seg_end, mapping = span
            records.append(mapping[phys - seg_start : end - seg_start])
            queue_offsets.append(current)
            total += size
            found += 1
    result.total_bytes = total
    result.next_begin_offset = index
    if result.records:
        result.status = GetStatus.FOUND
    elif removed and removed == index - offset:
        result.status = GetStatus.MESSAGE_WAS_REMOVING
    return result


def store_timestamp_at(commitlog: CommitLog, phys: int) -> int | None:
    """The store timestamp of the record at ``phys``; None if it is gone."""
    head = commitlog.read(phys, OFF_SYS_FLAG + 4)
    if head is None or _I32.unpack_from(head, 4)[0] != MESSAGE_MAGIC_CODE:
        return None
    at = store_timestamp_offset(_I32.unpack_from(head, OFF_SYS_FLAG)[0])
    raw = commitlog.read(phys + at, 8)
    return None if raw is None else int(_I64.unpack(raw)[0])


def offset_by_time(commitlog: CommitLog, queue: ConsumeQueue | None, timestamp_ms: int) -> int:
    """The first queue offset whose message was stored at or after ``timestamp_ms``; the max
    offset when every message is older, the min offset when the queue is empty or all newer."""
    if queue is None:
        return 0
    lo, hi = queue.min_offset, queue.max_offset
    while lo < hi:
        mid = (lo + hi) // 2
        entry = queue.entry(mid)
        stamp = None if entry is None else store_timestamp_at(commitlog, entry[0])
        if stamp is None or stamp < timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo
