"""Sorted disjoint ranges of queue offsets: what a group acknowledged past its committed
offset (kept by the broker in :mod:`reconsume.store.acked`, read by clients and jobs)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from reconsume.errors import InvalidArgumentError

Range = tuple[int, int]
"""Queue offsets ``start`` (included) to ``end`` (excluded)."""


def merge(ranges: Sequence[Range], added: Iterable[Range]) -> list[Range]:
    """``ranges`` and ``added`` as sorted disjoint ranges, adjacent ones joined; empty ranges
    are dropped. InvalidArgumentError for a range with a negative start."""
    fresh = []
    for start, end in added:
        if start < 0:
            raise InvalidArgumentError(f"acknowledged range [{start}, {end}) starts below 0")
        if end > start:
            fresh.append((start, end))
    merged: list[Range] = []
    for start, end in sorted([*ranges, *fresh]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def settle(committed: int, ranges: Sequence[Range]) -> tuple[int, list[Range]]:
    """Fold the ranges that reach ``committed`` into it and drop those wholly below it."""
    left: list[Range] = []
    for start, end in ranges:
        if left or start > committed:
            left.append((start, end))
        elif end > committed:
            committed = end
    return committed, left


def covered(ranges: Sequence[Range], low: int, high: int) -> int:
    """How many offsets in [``low``, ``high``) the ranges hold."""
    return sum(max(0, min(end, high) - max(start, low)) for start, end in ranges)


def is_acked(ranges: Sequence[Range], offset: int) -> bool:
    """Whether ``offset`` is in one of the ranges (sorted and disjoint, as :func:`merge`
    leaves them)."""
    at = bisect.bisect_right(ranges, (offset, _AFTER_ANY_END)) - 1
    return at >= 0 and ranges[at][0] <= offset < ranges[at][1]


_AFTER_ANY_END = 1 << 63
