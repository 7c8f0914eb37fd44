"""Long polling: pulls that found nothing wait here until a message arrives on their queue.

RocketMQ's ``PullRequestHoldService`` re-checks held pulls every few seconds and when the
store reports a new message. Here a held pull is a future registered under its (topic, queue);
a send completes the futures of the pulls its message can satisfy (offset below the new max
offset, tag code accepted by the pull's filter). Nothing polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Container, Iterable
from dataclasses import dataclass, field


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
        self.woken_total = 0
        """Held pulls a message woke so far (the others ended with their suspension)."""

    def hold(
        self, topic: str, queue_id: int, offset: int, tag_codes: Container[int] | None
    ) -> HeldPull:
        pull = HeldPull(topic, queue_id, offset, tag_codes)
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

    def __len__(self) -> int:
        return sum(len(held) for held in self._held.values())
