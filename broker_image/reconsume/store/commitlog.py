"""The commit log: every message of every topic, appended to fixed-size segment files.

Records never span segments. When a record does not fit, the rest of the segment is closed
by a blank record (``totalSize`` = bytes left, magic ``BLANK_MAGIC_CODE``) and the record goes
to a new segment named after its start offset. Every record leaves at least 8 bytes free, so
a blank always fits. Bytes past the write position are zero; recovery relies on that.
"""

from __future__ import annotations

import bisect
import mmap
import struct
from pathlib import Path

from reconsume.message.codec import BLANK_MAGIC_CODE
from reconsume.store.mapped_file import MappedFile, file_name, list_files

BLANK_MIN_BYTES = 8
_SIZE_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")


class CommitLog:
    """Segment files and the write position; the caller serialises appends."""

    def __init__(self, directory: Path, segment_bytes: int, *, preallocate: bool = True) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.preallocate = preallocate
        directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[MappedFile] = []
        self._starts: list[int] = []
        for start, path in list_files(directory):
            # Existing segments keep the size they were created with; a file a crash left
            # empty (before it was sized) gets the configured size.
            size = path.stat().st_size or segment_bytes
            self._add(MappedFile(path, start, size, preallocate=False))
        if not self.segments:
            self._add(self._create(0))
        self.write_offset = self.segments[0].start
        """Offset one past the last appended byte; set by recovery, advanced by :meth:`commit`."""

    def _create(self, start: int) -> MappedFile:
        return MappedFile(
            self.directory / file_name(start),
            start,
            self.segment_bytes,
            preallocate=self.preallocate,
        )

    def _add(self, segment: MappedFile) -> None:
        self.segments.append(segment)
        self._starts.append(segment.start)

    @property
    def min_offset(self) -> int:
        return self.segments[0].start

    @property
    def active(self) -> MappedFile:
        return self.segments[-1]

    def segment_at(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset``, or None if no segment does."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        segment = self.segments[i]
        return segment if offset < segment.end else None

    def reserve(self, size: int) -> tuple[MappedFile, int]:
        """Where a record of ``size`` bytes goes: its segment and position within it.

        Closes the active segment with a blank record and rolls to a new one when needed;
        :attr:`write_offset` then points at the new segment's start.
        """
        segment = self.segments[-1]
        local = self.write_offset - segment.start
        if local + size + BLANK_MIN_BYTES > segment.size:
            remaining = segment.size - local
            _I32.pack_into(segment.mm, local + 4, BLANK_MAGIC_CODE)
            _I32.pack_into(segment.mm, local, remaining)
            segment = self._roll(segment.end)
            self.write_offset = segment.start
            local = 0
        return segment, local

    def _roll(self, start: int) -> MappedFile:
        # A segment file can already exist past a crash that left it empty.
        if self.segments[-1].start == start:
            return self.segments[-1]
        segment = self._create(start)
        self._add(segment)
        return segment

    def ensure_segment(self, start: int) -> MappedFile:
        """The segment starting at ``start``, created if missing (recovery after a roll)."""
        existing = self.segment_at(start)
        if existing is not None:
            return existing
        return self._roll(start)

    def commit(self, size: int) -> None:
        self.write_offset += size

    def header(self, offset: int) -> tuple[int, int] | None:
        """(totalSize, magic) of the record at ``offset``, None outside the log."""
        segment = self.segment_at(offset)
        if segment is None or offset >= self.write_offset:
            return None
        local = offset - segment.start
        if local + 8 > segment.size:
            return None
        size, magic = _SIZE_MAGIC.unpack_from(segment.mm, local)
        return int(size), int(magic)

    def readable_span(self, offset: int) -> tuple[int, int, mmap.mmap] | None:
        """The segment holding ``offset`` as (its start, where what can be read of it ends —
        its end or the write position —, its mapping), or None if no segment holds it: a
        reader of many records slices them from one span until one lies outside it."""
        segment = self.segment_at(offset)
        if segment is None:
            return None
        return segment.start, min(segment.end, self.write_offset), segment.mm

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset``; None unless they lie inside one segment below the
        write position."""
        span = self.readable_span(offset)
        if span is None or offset + size > span[1]:
            return None
        start, _end, mapping = span
        return mapping[offset - start : offset + size - start]

    def flush(self, start: int, end: int) -> None:
        """fsync every segment holding bytes in [start, end)."""
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        for segment in self.segments[i:]:
            if segment.start >= end:
                break
            segment.flush()

    def drop_first(self) -> MappedFile:
        """Remove the oldest segment from the log (retention) and return it for deletion."""
        segment = self.segments.pop(0)
        self._starts.pop(0)
        return segment

    def drop_after(self, offset: int) -> list[MappedFile]:
        """Detach the segments that start after ``offset`` (recovery quarantines them)."""
        i = bisect.bisect_right(self._starts, offset)
        dropped = self.segments[i:]
        del self.segments[i:]
        del self._starts[i:]
        return dropped

    def restart_at(self, start: int) -> None:
        """Delete every segment and start an empty log at ``start`` (a replica following a
        master whose log begins there). The caller has set aside what the segments held."""
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        self._starts.clear()
        self._add(self._create(start))
        self.write_offset = start

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
