"""One pass at a time per object.

Kopf runs an object's handlers one after another, but its timers beside them, and its deletion
handlers while a timer's pass is still running. Passes that change the brokers hold the
object's lock, so a drift pass and an update, or a drift pass and a deletion, never apply at
the same time, and a pass that waited for a deletion does nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def object_key(body: Mapping[str, Any]) -> str:
    """The object's uid (its namespace and name when it has none, as in unit tests)."""
    meta = body.get("metadata") or {}
    uid = meta.get("uid")
    return str(uid) if uid else f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def deleting(body: Mapping[str, Any]) -> bool:
    """Whether the object's deletion has begun."""
    return (body.get("metadata") or {}).get("deletionTimestamp") is not None


class ObjectLocks:
    """A lock per object, dropped when no pass holds or waits for it."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, body: Mapping[str, Any]) -> AsyncIterator[None]:
        key = object_key(body)
        entry = self._entries.setdefault(key, _Entry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]
