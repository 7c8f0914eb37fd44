"""Tables a broker persists beside its log: topic and subscription-group configs, consumer
offsets and schedule offsets. Each is one JSON file in RocketMQ's shape, replaced atomically.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from reconsume.errors import TableError
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.store.atomic import read_json, write_json


class _Config(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


C = TypeVar("C", bound=_Config)


class ConfigTable(Generic[C]):
    """Name → config, saved on every change (configs change rarely and must not be lost).

    ``dataVersion`` counts changes so a name server or operator can tell a stale copy.
    """

    def __init__(self, path: Path, key: str, decode: Callable[[Mapping[str, Any]], C]) -> None:
        self.path = path
        self._key = key
        self._lock = threading.Lock()
        self._items: dict[str, C] = {}
        self.version = 0
        document = read_json(path)
        if document is None:
            return
        try:
            for name, item in document.get(key, {}).items():
                self._items[name] = decode(item)
            self.version = int(document.get("dataVersion", {}).get("counter", 0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise TableError(f"{path}: {exc}") from exc

    def get(self, name: str) -> C | None:
        return self._items.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, C]]:
        return list(self._items.items())

    def put(self, name: str, item: C) -> None:
        with self._lock:
            self._items[name] = item
            self._save()

    def delete(self, name: str) -> bool:
        with self._lock:
            if self._items.pop(name, None) is None:
                return False
            self._save()
            return True

    def replace(self, items: Mapping[str, C]) -> bool:
        """Make the table hold exactly ``items`` (a replica following its master's table);
        returns whether anything changed."""
        with self._lock:
            if {n: i.to_dict() for n, i in self._items.items()} == {
                n: i.to_dict() for n, i in items.items()
            }:
                return False
            self._items = dict(items)
            self._save()
            return True

    def _save(self) -> None:
        self.version += 1
        write_json(
            self.path,
            {
                self._key: {name: item.to_dict() for name, item in self._items.items()},
                "dataVersion": {"counter": self.version, "timestamp": int(time.time() * 1000)},
            },
        )


def topic_table(directory: Path) -> ConfigTable[TopicConfig]:
    return ConfigTable(directory / "topics.json", "topicConfigTable", TopicConfig.from_dict)


def group_table(directory: Path) -> ConfigTable[SubscriptionGroupConfig]:
    return ConfigTable(
        directory / "subscriptionGroup.json",
        "subscriptionGroupTable",
        SubscriptionGroupConfig.from_dict,
    )


class OffsetTable:
    """Key → {queue id → offset}, changed often and persisted in batches by :meth:`persist`.

    Consumer offsets use the key ``topic@group`` (RocketMQ's ``consumerOffset.json``);
    schedule offsets use the delay level (``delayOffset.json``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        """Serialises :meth:`persist` (the store's flush thread and the schedule service both
        call it; two writers would share the temp file)."""
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self.changes = 0
        """Counts changes since the table was opened (a replica asks again when it moves)."""
        document = read_json(path)
        if document is None:
            return
        try:
            for key, queues in document.get("offsetTable", {}).items():
                self._table[str(key)] = {int(q): int(o) for q, o in queues.items()}
        except (AttributeError, TypeError, ValueError) as exc:
            raise TableError(f"{path}: {exc}") from exc

    def get(self, key: str, queue_id: int) -> int | None:
        queues = self._table.get(key)
        return None if queues is None else queues.get(queue_id)

    def queues(self, key: str) -> dict[int, int]:
        return dict(self._table.get(key, {}))

    def keys(self) -> list[str]:
        return list(self._table)

    def set(self, key: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._table.setdefault(key, {})[queue_id] = offset
            self._dirty = True
            self.changes += 1

    def remove(self, key: str) -> bool:
        with self._lock:
            found = self._table.pop(key, None) is not None
            self._dirty = self._dirty or found
            self.changes += found
            return found

    def remove_where(self, predicate: Callable[[str], bool]) -> int:
        with self._lock:
            doomed = [key for key in self._table if predicate(key)]
            for key in doomed:
                del self._table[key]
            self._dirty = self._dirty or bool(doomed)
            self.changes += len(doomed)
            return len(doomed)

    def snapshot(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    def replace(self, table: Mapping[str, Mapping[int, int]]) -> None:
        """Hold exactly ``table`` (a replica following its master's offsets)."""
        with self._lock:
            fresh = {key: dict(queues) for key, queues in table.items()}
            if fresh != self._table:
                self._table = fresh
                self._dirty = True
                self.changes += 1

    def persist(self, *, force: bool = False) -> bool:
        """Write the table if it changed (or ``force``); returns whether it wrote. Writes are
        serialised and each writes a snapshot at least as new as the previous one."""
        with self._write_lock:
            with self._lock:
                if not (self._dirty or force):
                    return False
                snapshot = {key: dict(queues) for key, queues in self._table.items()}
                self._dirty = False
            try:
                write_json(
                    self.path,
                    {
                        "offsetTable": {
                            k: {str(q): o for q, o in v.items()} for k, v in snapshot.items()
                        }
                    },
                )
            except BaseException:
                with self._lock:
                    self._dirty = True  # written next time
                raise
        return True


def consumer_offset_key(topic: str, group: str) -> str:
    return f"{topic}@{group}"
