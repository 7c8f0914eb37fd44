"""The timer's delivered set (low-water mark + bitmap) against a plain set, and its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine import timer_progress
from reconsume.engine.timer_progress import (
    DeliveredSet,
    TimerProgress,
    load_progress,
    progress_path,
    save_progress,
)
from reconsume.errors import TableError


@given(st.integers(0, 50), st.lists(st.integers(0, 400), max_size=300))
def test_the_delivered_set_matches_a_plain_set(start: int, offsets: list[int]) -> None:
    delivered = DeliveredSet(start)
    reference = set(range(start))
    for offset in offsets:
        delivered.add(offset)
        reference.add(offset)
    expected_low = start
    while expected_low in reference:
        expected_low += 1
    assert delivered.low == expected_low
    for offset in range(0, 420):
        assert (offset in delivered) == (offset in reference), offset
    low, base, bits = delivered.snapshot()
    restored = TimerProgress(low, base, bits, None).delivered()
    assert restored.low == delivered.low
    assert all((o in restored) == (o in reference) for o in range(0, 420))


def test_bytes_below_the_mark_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timer_progress, "TRIM_BYTES", 2)
    delivered = DeliveredSet()
    delivered.add(100)  # out of order: kept above the mark
    for offset in range(100):
        delivered.add(offset)
    assert delivered.low == 101
    low, base, bits = delivered.snapshot()
    assert (low, base, bits) == (101, 96, bytes([0b11111]))  # bits below the mark mean nothing
    assert 99 in delivered
    assert 101 not in delivered
    delivered.add(103)
    assert delivered.snapshot() == (101, 96, bytes([0b10011111]))


def test_progress_survives_the_file_and_its_backup(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    assert load_progress(path) == TimerProgress.empty()
    first = TimerProgress(8, 8, bytes([0b101]), 4096)
    save_progress(path, first)
    assert load_progress(path) == first
    second = TimerProgress(10, 8, bytes([0b10001]), 8192)
    save_progress(path, second)
    assert load_progress(path) == second
    path.write_text("{torn")
    assert load_progress(path) == first  # the previous version, kept as .bak


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"lowWater": -1, "bitmapBase": 0},
        {"lowWater": 4, "bitmapBase": 5},
        {"lowWater": 4, "bitmapBase": 0, "bitmap": "not base64!"},
        {"lowWater": 4, "bitmapBase": 0, "bitmap": "AAAA"},
        {"lowWater": 4, "bitmapBase": 0, "redeliveryScanFrom": "12"},
    ],
)
def test_damaged_progress_is_refused(tmp_path: Path, document: object) -> None:
    path = progress_path(tmp_path)
    path.write_text(json.dumps(document))
    with pytest.raises(TableError):
        load_progress(path)
