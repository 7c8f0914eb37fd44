"""Epochs: which master wrote which part of a log.

Each time a broker becomes master it starts a new epoch, numbered higher than any before, at
its log's write position; the history is the list of (epoch, start offset), one file beside
the log. A replica adopts its master's history with the master's bytes. Two logs agree up to
the end of the newest epoch both hold (:func:`agreed_end`): a broker that was master, was
deposed and comes back as a replica keeps exactly that much and sets the rest aside, since
nothing past it was written by the master that won. This is Kafka's leader-epoch cache and
Apache RocketMQ 5's epoch file, as one small pure function and a file.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reconsume.errors import ReplicationError, TableError
from reconsume.store.atomic import read_json, write_json


@dataclass(frozen=True, slots=True)
class Epoch:
    epoch: int
    """Term of one mastership, higher than every earlier one (fencing compares these)."""
    start_offset: int
    """Commit-log offset of the first byte written in this epoch."""


def check_history(entries: Sequence[Epoch]) -> None:
    """Epochs strictly increase and start offsets never decrease, or :class:`ReplicationError`."""
    for earlier, later in itertools.pairwise(entries):
        if later.epoch <= earlier.epoch or later.start_offset < earlier.start_offset:
            raise ReplicationError(
                f"epoch history out of order: {earlier.epoch}@{earlier.start_offset} then "
                f"{later.epoch}@{later.start_offset}"
            )
    if entries and (entries[0].epoch < 1 or entries[0].start_offset < 0):
        raise ReplicationError(f"epoch history starts at {entries[0]}")


def epoch_end(entries: Sequence[Epoch], epoch: int, log_end: int) -> int | None:
    """Where ``epoch``'s part of a log ending at ``log_end`` ends, or None if the log holds no
    part of it (not in the history, or starting past the end)."""
    for i, entry in enumerate(entries):
        if entry.epoch == epoch:
            if entry.start_offset > log_end:
                return None
            following = entries[i + 1].start_offset if i + 1 < len(entries) else log_end
            return min(following, log_end)
    return None


def agreed_end(
    mine: Sequence[Epoch], my_end: int, theirs: Sequence[Epoch], their_end: int
) -> int | None:
    """The offset up to which two logs hold the same bytes, judged by their histories: the end
    of the newest epoch both hold, in the shorter of the two. None when they share no epoch."""
    held = {entry.epoch for entry in theirs if entry.start_offset <= their_end}
    for entry in reversed(mine):
        if entry.epoch in held and entry.start_offset <= my_end:
            ours = epoch_end(mine, entry.epoch, my_end)
            other = epoch_end(theirs, entry.epoch, their_end)
            if ours is not None and other is not None:
                return min(ours, other)
    return None


class EpochHistory:
    """The history of one store, persisted atomically in ``path`` on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        document = read_json(path)
        entries: list[Epoch] = []
        if document is not None:
            try:
                entries = [Epoch(int(e), int(s)) for e, s in document["epochs"]]
            except (KeyError, TypeError, ValueError) as exc:
                raise TableError(f"{path}: not an epoch history ({exc})") from exc
            check_history(entries)
        self._entries = tuple(entries)

    @property
    def entries(self) -> tuple[Epoch, ...]:
        return self._entries

    @property
    def current(self) -> Epoch | None:
        return self._entries[-1] if self._entries else None

    def begin(self, epoch: int, start_offset: int) -> None:
        """This store's broker became master in ``epoch`` and writes from ``start_offset``.
        An earlier epoch that wrote nothing (starting at the same offset) is dropped."""
        kept = [entry for entry in self._entries if entry.start_offset < start_offset]
        if self._entries and self._entries[-1].start_offset > start_offset:
            raise ReplicationError(
                f"epoch {epoch} cannot start at {start_offset}: epoch "
                f"{self._entries[-1].epoch} starts at {self._entries[-1].start_offset}"
            )
        self._replace([*kept, Epoch(epoch, start_offset)])

    def follow(self, entries: Sequence[Epoch]) -> None:
        """Adopt a master's history (this store now holds the master's log)."""
        self._replace(list(entries))

    def cut(self, offset: int) -> None:
        """The log was cut back to ``offset``: epochs starting past it are gone."""
        self._replace([entry for entry in self._entries if entry.start_offset <= offset])

    def _replace(self, entries: list[Epoch]) -> None:
        check_history(entries)
        if tuple(entries) == self._entries:
            return
        write_json(self.path, {"epochs": [[e.epoch, e.start_offset] for e in entries]})
        self._entries = tuple(entries)
