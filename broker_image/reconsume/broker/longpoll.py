"""Long polling: pulls that found nothing wait here until a message arrives on their queue.

RocketMQ's ``PullRequestHoldService`` re-checks held pulls every few seconds and when the
store reports a new message. Here a held pull is a future registered under its (topic, queue);
a send completes the futures of the pulls its message can satisfy (offset below the new max
offset, tag code accepted by the pull's filter). Nothing polls.

While reads stop short of the log's end (a master's read limit at what its replicas hold),
a message wakes nobody when stored: its wake-up waits (:meth:`PullWaiters.appended`) until
the limit passes the message's end (:meth:`PullWaiters.visible`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Collection, Container, Iterable
from dataclasses import dataclass, field

MAX_HIDDEN = 100_000
"""Wake-ups kept waiting for the read limit at most: past it (the limit stuck while writes
are refused), the oldest is done at once, a held pull at worst re-reads early and waits again."""


@dataclass(eq=False, slots=True)
class HeldPull:
    """One held pull: woken when (topic, queue) grows past ``offset`` with a matching tag."""

    topic: str
    queue_id: int
    offset: int
    tag_codes: Container[int] | None
    """Accepted tag codes; None accepts every message."""
    woken: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class PullWaiters:
    """Held pulls by (topic, queue)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], set[HeldPull]] = {}
        self._hidden: deque[tuple[int, str, int, int, Collection[int]]] = deque()
        """Wake-ups of messages past the read limit: (end, topic, queue, max offset, tag
        codes), in log order."""
        self.woken_total = 0
        """Held pulls a message woke so far (the others ended with their suspension)."""

    def hold(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        tag_codes: Container[int] | None,
        woken: asyncio.Future[None] | None = None,
    ) -> HeldPull:
        """Hold a pull of (topic, queue) from ``offset``; ``woken``: a future the pull shares
        with others (a receive waiting on several queues), completed by the first to wake."""
        if woken is None:
            pull = HeldPull(topic, queue_id, offset, tag_codes)
        else:
            pull = HeldPull(topic, queue_id, offset, tag_codes, woken)
        self._held.setdefault((topic, queue_id), set()).add(pull)
        return pull

    def release(self, pull: HeldPull) -> None:
        key = (pull.topic, pull.queue_id)
        held = self._held.get(key)
        if held is not None:
            held.discard(pull)
            if not held:
                del self._held[key]

    def holding(self, topic: str, queue_id: int) -> bool:
        """Whether any pull of (topic, queue) is held."""
        return (topic, queue_id) in self._held

    def notify(self, topic: str, queue_id: int, max_offset: int, tag_codes: Iterable[int]) -> int:
        """Wake the pulls of (topic, queue) that messages with ``tag_codes`` satisfy, now that
        the queue's max offset is ``max_offset``; returns how many were woken."""
        held = self._held.get((topic, queue_id))
        if not held:
            return 0
        codes: Collection[int] = tag_codes if isinstance(tag_codes, Collection) else [*tag_codes]
        woken = 0
        for pull in list(held):
            if pull.woken.done() or pull.offset >= max_offset:
                continue
            accepted = pull.tag_codes
            if accepted is None or any(code in accepted for code in codes):
                pull.woken.set_result(None)
                woken += 1
        self.woken_total += woken
        return woken

    def appended(
        self,
        end: int,
        limit: int | None,
        topic: str,
        queue_id: int,
        max_offset: int,
        tag_codes: Callable[[], Collection[int]],
    ) -> None:
        """Messages of (topic, queue) ending at commit-log offset ``end`` were stored, the
        queue's max offset is now ``max_offset``: wake their pulls now if ``limit`` (where
        reads stop; None: nowhere) lets them be read, else once :meth:`visible` passes
        ``end``. ``tag_codes`` gives the messages' tag codes, asked only when needed."""
        if limit is None or end <= limit:
            if (topic, queue_id) in self._held:
                self.notify(topic, queue_id, max_offset, tag_codes())
            return
        hidden = self._hidden
        hidden.append((end, topic, queue_id, max_offset, tag_codes()))
        if len(hidden) > MAX_HIDDEN:
            self._wake_oldest()

    def visible(self, limit: int | None) -> None:
        """Reads now stop at ``limit`` (None: nowhere): wake what the messages it passed
        satisfy."""
        hidden = self._hidden
        while hidden and (limit is None or hidden[0][0] <= limit):
            self._wake_oldest()

    def _wake_oldest(self) -> None:
        _end, topic, queue_id, max_offset, codes = self._hidden.popleft()
        self.notify(topic, queue_id, max_offset, codes)

    def __len__(self) -> int:
        return sum(len(held) for held in self._held.values())
