"""Offsets acknowledged ahead of the committed offset: merging, settling, the table."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError, TableError
from reconsume.message.offset_ranges import covered, is_acked, merge, settle
from reconsume.store.acked import AckedTable

ranges_st = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=20,
)


def _offsets(ranges: list[tuple[int, int]]) -> set[int]:
    return {o for start, end in ranges for o in range(start, end)}


@given(ranges_st, ranges_st)
def test_merge_holds_exactly_the_offsets_of_both_sorted_disjoint_and_joined(
    first: list[tuple[int, int]], second: list[tuple[int, int]]
) -> None:
    merged = merge(merge((), first), second)
    assert _offsets(merged) == _offsets(first) | _offsets(second)
    for (_, end), (start, _) in itertools.pairwise(merged):
        assert end < start  # disjoint and not adjacent
    assert all(start < end for start, end in merged)


@given(st.integers(0, 250), ranges_st)
def test_settle_folds_what_reaches_the_committed_offset(
    committed: int, ranges: list[tuple[int, int]]
) -> None:
    merged = merge((), ranges)
    after, left = settle(committed, merged)
    done = set(range(committed)) | _offsets(merged)
    assert set(range(after)) <= done
    assert after not in done  # the first offset not handled
    assert _offsets(left) == {o for o in done if o > after}
    assert covered(left, after, 10**6) == len(_offsets(left))
    assert all(is_acked(left, o) for o in _offsets(left))


def test_covered_counts_within_the_window_only() -> None:
    assert covered([(2, 5), (8, 12)], 3, 10) == 2 + 2
    assert covered([], 0, 10) == 0


def test_a_negative_start_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="below 0"):
        merge((), [(-1, 3)])


def test_the_table_acks_settles_and_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ackedOffsets.json"
    table = AckedTable(path)
    key = "%DLQ%g@%DLQ%g"
    # Offset 10 is kept: 11..20 are handled past it, 0..10 fold into the committed offset.
    assert table.ack(key, 0, 0, [(11, 20), (0, 10)]) == (10, [(11, 20)])
    assert table.ack(key, 1, 5, [(0, 3)]) == (5, [])
    assert AckedTable(path).get(key, 0) == [(11, 20)]
    assert AckedTable(path).get(key, 1) == []
    table.trim(key, 0, 15)  # committed moved by other means: what it passed folds in
    assert table.get(key, 0) == []
    assert AckedTable(path).snapshot() == {}


def test_a_replica_holds_exactly_its_masters_table(tmp_path: Path) -> None:
    master = AckedTable(tmp_path / "m.json")
    master.ack("t@g", 3, 0, [(4, 6)])
    replica = AckedTable(tmp_path / "r.json")
    replica.ack("t@g", 1, 0, [(7, 9)])
    assert replica.replace({k: v for k, v in master.snapshot().items()})
    assert replica.snapshot() == {"t@g": {3: [(4, 6)]}}
    assert not replica.replace(master.snapshot())
    assert AckedTable(tmp_path / "r.json").snapshot() == {"t@g": {3: [(4, 6)]}}


def test_a_garbled_file_is_a_table_error(tmp_path: Path) -> None:
    path = tmp_path / "ackedOffsets.json"
    path.write_text('{"ackedTable": {"t@g": {"x": [[1, 2]]}}}')
    with pytest.raises(TableError):
        AckedTable(path)
