"""The messages of one queue a push consumer has pulled and not yet finished.

RocketMQ's ``ProcessQueue``: messages held in offset order, so the offset that may be
committed is always the smallest one still being consumed (or, when none is, one past the
largest pulled). Holding too many pauses the queue's pull loop (flow control).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from reconsume.client.routes import MessageQueue
from reconsume.message.model import StoredMessage

LOCK_EXPIRY_S = 30.0
"""A broker lock not renewed for this long is no longer trusted by the client."""


class ProcessQueue:
    def __init__(self, queue: MessageQueue, max_held: int) -> None:
        self.queue = queue
        self.dropped = False
        self.paused = False
        """Handing over: no new pulls or batches start; running ones finish."""
        self.locked = False
        self.last_lock_s = 0.0
        self._max_held = max_held
        # Insertion order is offset order: messages of one queue arrive in increasing offsets.
        self._held: dict[int, StoredMessage] = {}
        self._consuming: dict[int, StoredMessage] = {}
        self._max_offset = -1
        self._pulled_to = -1
        """The next offset to pull: everything before it was delivered here or filtered out."""
        self._room = asyncio.Event()
        self._room.set()
        self._running = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    def __len__(self) -> int:
        return len(self._held) + len(self._consuming)

    @property
    def lock_valid(self) -> bool:
        return self.locked and time.monotonic() - self.last_lock_s < LOCK_EXPIRY_S

    def _changed(self) -> None:
        if len(self) < self._max_held:
            self._room.set()
        else:
            self._room.clear()

    async def wait_for_room(self) -> None:
        await self._room.wait()

    def is_active(self) -> bool:
        """Whether new work for this queue may start."""
        return not (self.dropped or self.paused)

    def begin(self) -> None:
        """A batch of this queue enters the listener."""
        self._running += 1
        self._quiet.clear()

    def end(self) -> None:
        """The batch's result has been applied."""
        self._running -= 1
        if self._running == 0:
            self._quiet.set()

    async def wait_quiet(self, timeout_s: float) -> bool:
        """Wait until no batch of this queue is in the listener; False on timeout."""
        if self._running == 0:
            return True
        try:
            async with asyncio.timeout(timeout_s):
                await self._quiet.wait()
        except TimeoutError:
            return False
        return True

    def put(self, messages: Iterable[StoredMessage], pulled_to: int = -1) -> None:
        self._pulled_to = max(self._pulled_to, pulled_to)
        for message in messages:
            self._held[message.queue_offset] = message
            self._max_offset = max(self._max_offset, message.queue_offset)
        self._changed()

    def remove(self, messages: Iterable[StoredMessage]) -> int:
        """Forget finished messages; the offset that is now safe to commit (-1: none)."""
        if self._max_offset < 0:
            return -1
        for message in messages:
            self._held.pop(message.queue_offset, None)
        self._changed()
        if self._held:
            return next(iter(self._held))
        return max(self._max_offset + 1, self._pulled_to)

    # ------------------------------------------------------------- orderly consumption
    def take(self, count: int) -> list[StoredMessage]:
        """The next ``count`` messages in order, moved aside until commit or rollback."""
        taken: list[StoredMessage] = []
        while self._held and len(taken) < count:
            offset = next(iter(self._held))
            message = self._held.pop(offset)
            self._consuming[offset] = message
            taken.append(message)
        return taken

    def commit(self) -> int:
        """The taken messages are done: the offset after the last of them (-1: none taken)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        self._consuming.clear()
        self._changed()
        return offset if self._held else max(offset, self._pulled_to)

    def rollback(self, messages: Iterable[StoredMessage]) -> None:
        """Put taken messages back in front, to be consumed again."""
        again = {m.queue_offset: m for m in messages}
        for offset in again:
            self._consuming.pop(offset, None)
        self._held = dict(sorted({**self._held, **again}.items()))
        self._changed()
