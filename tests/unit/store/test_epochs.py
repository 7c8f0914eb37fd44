"""Epoch histories: the point two logs agree to, against the logs themselves; the history
file's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import ReplicationError, TableError
from reconsume.store.epochs import Epoch, EpochHistory, agreed_end, epoch_end

lengths = st.integers(0, 5)


def history(labels: list[int], trailing: int | None) -> list[Epoch]:
    """The history of a log whose byte i was written in epoch ``labels[i]``."""
    entries: list[Epoch] = []
    for offset, epoch in enumerate(labels):
        if not entries or entries[-1].epoch != epoch:
            entries.append(Epoch(epoch, offset))
    if trailing is not None:  # a master elected that has not written yet
        entries.append(Epoch(trailing, len(labels)))
    return entries


@st.composite
def two_logs(draw: st.DrawFn) -> tuple[list[int], list[int], list[int | None]]:
    """Two logs with a shared past: common epochs, then each holds some of the last common
    epoch's bytes and goes on under epochs of its own (no epoch is written by two masters)."""
    labels: list[int] = []
    epoch = 0
    for length in draw(st.lists(st.integers(1, 5), max_size=4)):
        epoch += draw(st.integers(1, 3))
        labels += [epoch] * length
    cut_a, cut_b = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    last = epoch + 1
    a, b = labels + [last] * cut_a, labels + [last] * cut_b
    next_epoch = last + 1
    trailing: list[int | None] = []
    for log in (a, b):
        for length in draw(st.lists(lengths, max_size=3)):
            log += [next_epoch] * length
            next_epoch += 1
        if draw(st.booleans()):
            trailing.append(next_epoch)
            next_epoch += 1
        else:
            trailing.append(None)
    return a, b, trailing


@given(two_logs())
def test_two_logs_agree_up_to_their_common_prefix(
    logs: tuple[list[int], list[int], list[int | None]],
) -> None:
    a, b, (trailing_a, trailing_b) = logs
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    mine, theirs = history(a, trailing_a), history(b, trailing_b)
    point = agreed_end(mine, len(a), theirs, len(b))
    assert point == agreed_end(theirs, len(b), mine, len(a))
    if point is None:
        assert common == 0
    else:
        assert point == common


def test_epoch_end() -> None:
    entries = [Epoch(1, 0), Epoch(3, 100), Epoch(4, 250)]
    assert epoch_end(entries, 1, 300) == 100
    assert epoch_end(entries, 3, 300) == 250
    assert epoch_end(entries, 4, 300) == 300
    assert epoch_end(entries, 3, 180) == 180  # the log ends inside epoch 3
    assert epoch_end(entries, 4, 180) is None  # epoch 4 starts past the end
    assert epoch_end(entries, 2, 300) is None


def test_the_history_file(tmp_path: Path) -> None:
    path = tmp_path / "epochs.json"
    history = EpochHistory(path)
    assert history.current is None
    history.begin(1, 0)
    history.begin(2, 500)
    history.begin(5, 500)  # epoch 2 wrote nothing: dropped
    assert EpochHistory(path).entries == (Epoch(1, 0), Epoch(5, 500))
    with pytest.raises(ReplicationError, match="cannot start at 400"):
        history.begin(6, 400)
    with pytest.raises(ReplicationError, match="out of order"):
        history.follow([Epoch(2, 0), Epoch(2, 10)])
    history.cut(499)
    assert EpochHistory(path).entries == (Epoch(1, 0),)
    history.follow([Epoch(1, 0), Epoch(7, 300)])
    assert EpochHistory(path).current == Epoch(7, 300)
    path.write_text('{"epochs": [[1, "x"]]}')
    path.with_name("epochs.json.bak").unlink()
    with pytest.raises(TableError, match="not an epoch history"):
        EpochHistory(path)
