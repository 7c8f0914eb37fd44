"""A fixed-size file mapped into memory, named after the offset of its first byte."""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path

from reconsume.store.atomic import fsync_directory

NAME_DIGITS = 20


def file_name(start: int) -> str:
    """Segment files are named by their start offset, zero-padded to sort lexically."""
    return f"{start:0{NAME_DIGITS}d}"


def list_files(directory: Path) -> list[tuple[int, Path]]:
    """(start, path) of the segment files in ``directory``, in order."""
    if not directory.is_dir():
        return []
    found = [
        (int(p.name), p)
        for p in directory.iterdir()
        if p.is_file() and len(p.name) == NAME_DIGITS and p.name.isdigit()
    ]
    return sorted(found)


class MappedFile:
    """A file of ``size`` bytes mapped shared; writes go straight into the page cache.

    ``flush`` (fdatasync, which releases the GIL) may run on another thread than the writer;
    ``close`` waits for a running flush and makes later flushes no-ops.
    """

    def __init__(self, path: Path, start: int, size: int, *, preallocate: bool = True) -> None:
        self.path = path
        self.start = start
        self.size = size
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            current = os.fstat(fd).st_size
            if current < size:
                if preallocate:
                    try:
                        os.posix_fallocate(fd, current, size - current)
                    except OSError:
                        os.ftruncate(fd, size)
                else:
                    os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._lock = threading.Lock()
        self.closed = False
        if created:
            fsync_directory(path.parent)

    @property
    def end(self) -> int:
        """Offset one past this file's last byte."""
        return self.start + self.size

    def flush(self) -> None:
        """Make every write to the mapping durable."""
        with self._lock:
            if not self.closed:
                os.fdatasync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self.mm.close()
            os.close(self._fd)

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        fsync_directory(self.path.parent)
