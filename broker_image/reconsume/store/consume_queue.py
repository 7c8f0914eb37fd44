"""Consume queues: per (topic, queue) index of the commit log, 20 bytes an entry.

An entry is (commit-log offset i64, record size i32, tag code i64). The tag code is the hash
of the message's TAGS, except in the schedule topic, where it holds the due time in ms. The
logical offset of a message is its entry's index. Files hold a fixed number of entries and
are named after the index of their first entry; entries past the end are zero (size 0).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from reconsume.store.mapped_file import MappedFile, file_name, list_files

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20
_SIZE_FIELD = struct.Struct(">i")

Entry = tuple[int, int, int]


class ConsumeQueue:
    """One (topic, queue id) index; the store serialises writers."""

    def __init__(
        self, directory: Path, topic: str, queue_id: int, entries_per_file: int, preallocate: bool
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        existing = list_files(directory)
        if existing and existing[0][1].stat().st_size >= ENTRY_SIZE:
            # Files written under another setting keep their layout.
            entries_per_file = existing[0][1].stat().st_size // ENTRY_SIZE
        self.entries_per_file = entries_per_file
        self.file_bytes = entries_per_file * ENTRY_SIZE
        self.preallocate = preallocate
        self.files: list[MappedFile] = []
        self.min_offset = 0
        """Index of the first entry still readable (retention moves it)."""
        self.max_offset = 0
        """Index the next entry gets."""
        self.flushed_offset = 0
        for start, path in existing:
            self.files.append(MappedFile(path, start, self.file_bytes, preallocate=False))
        if self.files:
            self.min_offset = self.files[0].start
            self.max_offset = self._find_end()
        self.flushed_offset = self.max_offset

    def _find_end(self) -> int:
        """First index whose entry is empty, by binary search over the last non-empty file."""
        while len(self.files) > 1 and self._size_at(self.files[-1], 0) == 0:
            # an empty file after a full one: the end is its start unless the previous one
            # is not full (then the empty file is stray)
            last = self.files[-1]
            previous = self.files[-2]
            if self._size_at(previous, self.entries_per_file - 1) != 0:
                return last.start
            self.files.pop().delete()
        mapped = self.files[-1]
        lo, hi = 0, self.entries_per_file
        while lo < hi:
            mid = (lo + hi) // 2
            if self._size_at(mapped, mid) != 0:
                lo = mid + 1
            else:
                hi = mid
        return mapped.start + lo

    @staticmethod
    def _size_at(mapped: MappedFile, local_index: int) -> int:
        return int(_SIZE_FIELD.unpack_from(mapped.mm, local_index * ENTRY_SIZE + 8)[0])

    def _file_for(self, index: int) -> MappedFile | None:
        if not self.files:
            return None
        i = (index - self.files[0].start) // self.entries_per_file
        if 0 <= i < len(self.files):
            mapped = self.files[i]
            if mapped.start <= index < mapped.start + self.entries_per_file:
                return mapped
        return None

    def append(self, commit_log_offset: int, size: int, tag_code: int) -> int:
        """Write the next entry; returns its index."""
        index = self.max_offset
        mapped = self.files[-1] if self.files else None
        if mapped is None or index >= mapped.start + self.entries_per_file:
            mapped = self._new_file(index)
        ENTRY.pack_into(
            mapped.mm, (index - mapped.start) * ENTRY_SIZE, commit_log_offset, size, tag_code
        )
        self.max_offset = index + 1
        return index

    def _new_file(self, start: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        mapped = MappedFile(
            self.directory / file_name(start), start, self.file_bytes, preallocate=self.preallocate
        )
        if not self.files:
            self.min_offset = start
        self.files.append(mapped)
        return mapped

    def reset_to(self, index: int) -> None:
        """Make an empty queue start at ``index`` (its first message's queue offset)."""
        if self.files or self.max_offset:
            msg = f"consume queue {self.topic}/{self.queue_id} is not empty"
            raise ValueError(msg)
        self.min_offset = self.max_offset = self.flushed_offset = index

    def entry(self, index: int) -> Entry | None:
        mapped = self._file_for(index)
        if mapped is None or index >= self.max_offset:
            return None
        phys, size, tag = ENTRY.unpack_from(mapped.mm, (index - mapped.start) * ENTRY_SIZE)
        return int(phys), int(size), int(tag)

    def entries(self, start: int, max_count: int) -> list[Entry]:
        """Up to ``max_count`` entries from ``start`` that lie in one file (callers loop)."""
        mapped = self._file_for(start)
        if mapped is None or start >= self.max_offset:
            return []
        end = min(start + max_count, self.max_offset, mapped.start + self.entries_per_file)
        raw = mapped.mm[(start - mapped.start) * ENTRY_SIZE : (end - mapped.start) * ENTRY_SIZE]
        return list(ENTRY.iter_unpack(raw))

    def truncate(self, index: int) -> int:
        """Drop entries from ``index`` on; returns how many were dropped."""
        index = max(index, self.min_offset)
        dropped = max(self.max_offset - index, 0)
        while self.files and self.files[-1].start > index:
            self.files.pop().delete()
        if self.files:
            mapped = self.files[-1]
            local = (index - mapped.start) * ENTRY_SIZE
            if local < self.file_bytes:
                mapped.mm[local:] = bytes(self.file_bytes - local)
        self.max_offset = index
        self.flushed_offset = min(self.flushed_offset, index)
        if not self.files:
            self.min_offset = index
        return dropped

    def flush(self) -> None:
        """fsync the files written since the last flush."""
        target = self.max_offset
        for mapped in list(self.files):
            if mapped.start + self.entries_per_file > self.flushed_offset and mapped.start < target:
                mapped.flush()
        self.flushed_offset = target

    def drop_files_below(self, commit_log_min: int) -> int:
        """Delete whole files whose entries all point below ``commit_log_min`` and move
        :attr:`min_offset` to the first entry still in the log. Returns files deleted."""
        deleted = 0
        while len(self.files) > 1:
            last_in_first = self.files[1].start - 1
            entry = self.entry(last_in_first)
            if entry is None or entry[0] >= commit_log_min:
                break
            self.files.pop(0).delete()
            deleted += 1
        self.min_offset = self._first_at_or_after(commit_log_min)
        return deleted

    def _first_at_or_after(self, commit_log_min: int) -> int:
        lo = self.files[0].start if self.files else self.min_offset
        lo = max(lo, self.min_offset)
        hi = self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            if entry is not None and entry[0] < commit_log_min:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
