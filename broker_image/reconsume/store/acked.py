"""Offsets acknowledged ahead of a group's committed offset.

A committed offset says "everything before this is done", which is all a consumer needs. A
dead-letter job with a filter is different: it handles the dead letters the filter matches and
must leave the others where they are, with their ids, so the next run sees them again. Its
committed offset stops at the first dead letter it kept; what it handled after that one is
held here, per (``topic@group``, queue), as sorted disjoint half-open ranges of queue offsets.
A range that reaches the committed offset is folded into it (``settle``), so the table only
ever holds what lies past a kept message (the range arithmetic is
:mod:`reconsume.message.offset_ranges`).

Readers of the backlog subtract what is held (``covered``): the dead-letter depth the
broker exports, the ConsumerGroup status and the alerts count what no job has handled, and a
filtered drain lowers it by what it archived without raising it for what it kept.

The table is small (a range per run of handled offsets between two kept ones) and changes once
per job batch, so it is written whole on every change, like the topic and group configs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reconsume.errors import InvalidArgumentError, TableError
from reconsume.message.offset_ranges import Range, merge, settle
from reconsume.store.atomic import read_json, write_json

MAX_RANGES = 500_000
"""Ranges one queue may hold: a job that handles every other message of a long queue is
refused past it rather than growing the table without bound (and the answers that list them
stay within a remoting frame's 16 MiB)."""


class AckedTable:
    """``topic@group`` → queue id → ranges, saved on every change (``ackedOffsets.json``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[str, dict[int, list[Range]]] = {}
        self.version = 0
        document = read_json(path)
        if document is None:
            return
        try:
            self._table = _decode(document.get("ackedTable", {}))
            self.version = int(document.get("dataVersion", {}).get("counter", 0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise TableError(f"{path}: {exc}") from exc

    def get(self, key: str, queue_id: int) -> list[Range]:
        return list(self._table.get(key, {}).get(queue_id, ()))

    def ack(
        self, key: str, queue_id: int, committed: int, added: Iterable[Range]
    ) -> tuple[int, list[Range]]:
        """Hold ``added`` for the queue whose committed offset is ``committed``; returns the
        committed offset after settling and what is held past it."""
        with self._lock:
            queues = self._table.setdefault(key, {})
            merged = merge(queues.get(queue_id, ()), added)
            committed, left = settle(committed, merged)
            if len(left) > MAX_RANGES:
                raise InvalidArgumentError(
                    f"{key} queue {queue_id} would hold {len(left)} acknowledged ranges, "
                    f"more than {MAX_RANGES}"
                )
            self._put(key, queue_id, left)
            return committed, list(left)

    def trim(self, key: str, queue_id: int, committed: int) -> None:
        """The queue's committed offset moved to ``committed`` by other means (a consumer's
        commit, a reset): drop or fold what it passed."""
        with self._lock:
            held = self._table.get(key, {}).get(queue_id)
            if not held:
                return
            _, left = settle(committed, held)
            if left != held:
                self._put(key, queue_id, left)

    def remove_where(self, predicate: Callable[[str], bool]) -> int:
        """Drop the keys ``predicate`` accepts (a deleted group or topic)."""
        with self._lock:
            doomed = [key for key in self._table if predicate(key)]
            for key in doomed:
                del self._table[key]
            if doomed:
                self._save()
            return len(doomed)

    def snapshot(self) -> dict[str, dict[int, list[Range]]]:
        with self._lock:
            return {k: {q: list(r) for q, r in v.items()} for k, v in self._table.items()}

    def replace(self, table: Mapping[str, Mapping[Any, Sequence[Sequence[Any]]]]) -> bool:
        """Hold exactly ``table`` (a replica following its master's, queue ids and offsets as
        its JSON document has them or as ints); returns whether anything changed."""
        fresh = {
            key: {int(q): [(int(s), int(e)) for s, e in r] for q, r in queues.items() if r}
            for key, queues in table.items()
        }
        fresh = {key: queues for key, queues in fresh.items() if queues}
        with self._lock:
            if fresh == self._table:
                return False
            self._table = fresh
            self._save()
            return True

    def to_document(self) -> dict[str, dict[str, list[list[int]]]]:
        """The table in its JSON shape (what a replica is sent)."""
        return _encode(self.snapshot())

    def _put(self, key: str, queue_id: int, ranges: list[Range]) -> None:
        queues = self._table.setdefault(key, {})
        if ranges:
            queues[queue_id] = ranges
        else:
            queues.pop(queue_id, None)
            if not queues:
                del self._table[key]
        self._save()

    def _save(self) -> None:
        self.version += 1
        write_json(
            self.path,
            {
                "ackedTable": _encode(self._table),
                "dataVersion": {"counter": self.version, "timestamp": int(time.time() * 1000)},
            },
        )


def _encode(table: Mapping[str, Mapping[int, Sequence[Range]]]) -> dict[str, Any]:
    return {
        key: {str(q): [[s, e] for s, e in ranges] for q, ranges in queues.items()}
        for key, queues in table.items()
    }


def _decode(document: Mapping[str, Any]) -> dict[str, dict[int, list[Range]]]:
    return {
        str(key): {int(q): merge((), ((int(s), int(e)) for s, e in r)) for q, r in queues.items()}
        for key, queues in document.items()
    }
