"""Files replaced atomically: write a temp file, fsync, keep the old one as ``.bak``, rename.

A reader falls back to the ``.bak`` copy when the main file is missing or unreadable, so a
crash at any point leaves either the new or the previous content, never a torn file. Also the
store directory's lock, the other file-level guarantee the store relies on.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path
from typing import Any

from reconsume.errors import StoreError, TableError

log = logging.getLogger(__name__)


def fsync_directory(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """``path`` (created or truncated) holding ``data``, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, data)
    if path.exists():
        keep_backup(path)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def keep_backup(path: Path) -> None:
    """``path``'s current content as ``path.bak``, with ``path`` present throughout: a hard
    link renamed over the old backup, so a reader never finds the file missing. Where hard
    links are not supported the file itself is renamed (absent until the new one is in)."""
    backup = path.with_name(path.name + ".bak")
    link = path.with_name(path.name + ".bak.tmp")
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
    except OSError:
        os.replace(path, backup)
        return
    os.replace(link, backup)


def write_json(path: Path, document: Any) -> None:
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> Any | None:
    """The JSON document at ``path`` or, failing that, at its ``.bak``; None if neither exists.

    Raises TableError when a file exists but neither it nor the backup parses.
    """
    backup = path.with_name(path.name + ".bak")
    errors: list[str] = []
    for candidate in (path, backup):
        try:
            raw = candidate.read_bytes()
        except FileNotFoundError:
            continue
        try:
            document = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        if candidate is backup:
            log.warning("%s is missing or damaged (%s); using %s", path, errors, backup)
        return document
    if errors:
        raise TableError(f"cannot read {path} or its backup: {'; '.join(errors)}")
    return None


def lock_directory(root: Path) -> int:
    """Hold ``root`` for this process (released when the descriptor is closed); a second
    process opening the same store is refused instead of corrupting it."""
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise StoreError(f"store directory {root} is in use by another process") from exc
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
