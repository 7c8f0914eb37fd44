"""Atomic replacement of small files: the new content or the old, the old kept as ``.bak``,
and the file never missing while it is replaced."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from reconsume.store import atomic
from reconsume.store.atomic import read_json, write_json


def test_the_previous_version_is_kept_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    write_json(path, {"v": 1})
    assert not path.with_name("offsets.json.bak").exists()
    write_json(path, {"v": 2})
    write_json(path, {"v": 3})
    assert read_json(path) == {"v": 3}
    assert read_json(path.with_name("offsets.json.bak")) == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsets.json", "offsets.json.bak"]


def test_a_reader_never_finds_the_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    write_json(path, {"v": 0})
    done = threading.Event()
    missing: list[int] = []
    reads = 0

    def read() -> None:
        nonlocal reads
        while not done.is_set():
            try:
                path.read_bytes()
            except FileNotFoundError:
                missing.append(reads)
            reads += 1

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for version in range(1, 200):
            write_json(path, {"v": version})
    finally:
        done.set()
        reader.join()
    assert reads > 0
    assert missing == []
    assert read_json(path) == {"v": 199}


def test_a_link_left_by_a_crash_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    write_json(path, {"v": 1})
    path.with_name("checkpoint.bak.tmp").write_text("left over")
    write_json(path, {"v": 2})
    assert read_json(path.with_name("checkpoint.bak")) == {"v": 1}
    assert not path.with_name("checkpoint.bak.tmp").exists()


def test_without_hard_links_the_file_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(atomic.os, "link", no_links)
    path = tmp_path / "topics.json"
    write_json(path, {"v": 1})
    write_json(path, {"v": 2})
    assert read_json(path) == {"v": 2}
    assert read_json(path.with_name("topics.json.bak")) == {"v": 1}
    assert os.stat(path).st_nlink == 1
