"""Queue locks of orderly consumers (RocketMQ's ``RebalanceLockManager``).

An orderly consumer locks the queues it consumes on the broker that owns them, and renews the
locks every 20 s; a lock not renewed for 60 s expires and another client of the group may take
it. Locks live in memory only: after a broker restart every client locks again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconsume.errors import InvalidArgumentError

LOCK_MAX_LIVE_S = 60.0
"""RocketMQ's ``rocketmq.broker.rebalance.lockMaxLiveTime`` default."""


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """RocketMQ's ``MessageQueue``: topic, broker name and queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_dict(cls, data: Any) -> QueueKey:
        try:
            return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"not a MessageQueue: {data!r}") from exc


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_s: float


class LockTable:
    """Group → queue → the client holding it."""

    def __init__(
        self, max_live_s: float = LOCK_MAX_LIVE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._max_live_s = max_live_s
        self._clock = clock
        self._locks: dict[str, dict[QueueKey, _Lock]] = {}

    def try_lock(self, group: str, queues: Iterable[QueueKey], client_id: str) -> set[QueueKey]:
        """Lock (or renew) what ``client_id`` may hold; returns the queues it now holds."""
        now = self._clock()
        table = self._locks.setdefault(group, {})
        held: set[QueueKey] = set()
        for queue in queues:
            lock = table.get(queue)
            if lock is None or lock.client_id == client_id or self._expired(lock, now):
                table[queue] = _Lock(client_id, now)
                held.add(queue)
        return held

    def unlock(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        """Release the queues ``client_id`` holds; others' locks stay."""
        table = self._locks.get(group)
        if table is None:
            return
        for queue in queues:
            lock = table.get(queue)
            if lock is not None and lock.client_id == client_id:
                del table[queue]
        if not table:
            del self._locks[group]

    def holder(self, group: str, queue: QueueKey) -> str | None:
        """The client holding an unexpired lock on ``queue``, if any."""
        lock = self._locks.get(group, {}).get(queue)
        if lock is None or self._expired(lock, self._clock()):
            return None
        return lock.client_id

    def _expired(self, lock: _Lock, now: float) -> bool:
        return now - lock.last_update_s > self._max_live_s
