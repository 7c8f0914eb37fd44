"""The schedule service's settings and per-level state."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from reconsume.engine.delays import schedule_queue_id


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    """How the schedule service reads, retries and persists."""

    persist_interval_ms: int = 5_000
    """Milliseconds between writes of the levels' offsets: a crash re-runs at most the
    deliveries of this window (those whose copies survived are skipped, not repeated)."""
    batch_size: int = 64
    """Consume-queue entries read at once by a worker."""
    retry_min_backoff_ms: int = 100
    """Milliseconds before the first retry of a put the store refused; doubles per failure."""
    retry_max_backoff_ms: int = 1_000
    """Longest wait between retries of a refused put, in milliseconds."""
    stop_timeout_s: float = 5.0
    """Seconds :meth:`ScheduleService.stop` waits for deliveries in progress."""


class Batch:
    """Deliveries appended together, waiting to be known durable."""

    __slots__ = ("cursor", "done", "durable", "first_offset")

    def __init__(self, cursor: int, first_offset: int | None) -> None:
        self.cursor = cursor
        """The level's cursor after the batch."""
        self.first_offset = first_offset
        """Lowest commit-log offset of the batch's copies, appended or found delivered before
        a restart (None: none)."""
        self.done = False
        self.durable: asyncio.Future[None] | None = None


class LevelState:
    """One level's worker state."""

    __slots__ = ("appended", "confirmed", "cursor", "delay_ms", "inflight", "level", "queue_id")

    def __init__(self, level: int, delay_ms: int, cursor: int) -> None:
        self.level = level
        self.queue_id = schedule_queue_id(level)
        self.delay_ms = delay_ms
        self.cursor = cursor
        """The next entry to deliver."""
        self.confirmed = cursor
        """Entries below this one are delivered durably."""
        self.inflight: deque[Batch] = deque()
        """Batches delivered but not yet confirmed, oldest first."""
        self.appended = asyncio.Event()

    @property
    def unconfirmed(self) -> int | None:
        """Lowest commit-log offset of a copy not yet confirmed (a batch's copies found
        delivered before a restart may lie below an earlier batch's)."""
        return min(
            (b.first_offset for b in self.inflight if b.first_offset is not None), default=None
        )
