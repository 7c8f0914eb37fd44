"""What the schedule service (delay levels) and the timer service share: delivering one due
entry to its real topic, retrying while the store refuses, skipping what can never be
delivered and what was delivered before a restart or failover, counting, confirming
deliveries once durable, and stopping.

:class:`DeliveryService` is their base; each service keeps what differs: how it finds due
entries (a queue per level in due order, or a heap over one queue) and how it records what was
delivered (an offset per level, or a set).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from reconsume.engine.redelivery import Earlier
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.schedule_stats import ScheduleStats
from reconsume.engine.scheduled import restore
from reconsume.errors import CodecError, InvalidArgumentError, ReplicaUnavailableError, StoreError
from reconsume.store import FlushMode, MessageStore, PutRequest, PutResult

log = logging.getLogger(__name__)

Appender = Callable[[PutRequest], PutResult]
"""Appends a delivered message and wakes whoever waits on its queue; raises StoreError or
OSError when the store refuses the write, InvalidArgumentError when the message is invalid."""
Entry = tuple[int, bytes]
"""A due entry's commit-log offset and record."""

MIN_DUE_MS = 2**31
"""Any tag code below this is a TAGS hash (a Java int), not a due time: the entry was indexed
without the schedule hook (e.g. by a tool recovering the store), so its due time is taken
from the record instead."""


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def next_backoff(current: float, maximum: float) -> float:
    """The delay after one of ``current`` (in any unit): doubled, bounded by ``maximum``. The
    schedule and timer services' refused puts and the broker's registration retries use it."""
    return min(current * 2, maximum)


class DeliveryService:
    """Call :meth:`start` on the broker's event loop once the store is open, :meth:`stop`
    before closing it. Subclasses start their tasks with :meth:`_worker` and implement the
    hooks at the end."""

    def __init__(
        self,
        store: MessageStore,
        append: Appender,
        settings: ScheduleSettings | None,
        now_ms: Callable[[], int],
    ) -> None:
        self.store = store
        self.stats = ScheduleStats()
        self._append = append
        self._settings = settings or ScheduleSettings()
        self._now_ms = now_ms
        self._sync = store.settings.flush_mode is FlushMode.SYNC
        self._redelivered: dict[int, PutResult] = {}
        """Entries the persisted progress counts as undelivered although the log holds a
        delivery of them (found at start): record offset -> that copy. Each is skipped when it
        comes due, and the redelivery scan floor stays at or below its copy until then."""
        self._stopping = False
        self._stopped = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def stop(self) -> None:
        """Finish deliveries in progress (up to ``stop_timeout_s``), then persist."""
        self._stopping = True
        self._stopped.set()
        self._wake_workers()
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=self._settings.stop_timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._tasks.clear()
        durable = self._durable_futures()
        if durable:  # confirm what was delivered, so that a clean restart repeats nothing
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.stop_timeout_s):
                    await asyncio.gather(*durable, return_exceptions=True)
        await self.persist()

    # ------------------------------------------------------------------ delivering
    async def _worker(self, run: Callable[[], Awaitable[None]], key: int) -> None:
        while not self._stopping:
            try:
                await run()
            except Exception:
                # A bug must not stop deliveries for good: log it and carry on after a pause.
                log.exception("%s worker failed", self._label(key))
                await self._pause(self._settings.retry_max_backoff_ms / 1000)

    async def _put(
        self, read: Callable[[int], Entry | None], position: int, due_ms: int, key: int
    ) -> tuple[bool, PutResult | None]:
        """Put the entry ``read(position)`` finds to its real topic, retrying while the store
        refuses. Returns whether to move past the entry (False: stopping) and where its copy
        lies: the put's result, or the copy delivered before a restart or failover (the entry
        is not delivered again); None: discarded. The caller confirms the entry once the log
        is stored up to the copy's end, and keeps its redelivery scan floor at or below the
        copy until then. ``key`` is the entry's level (0 for the timer): its key in
        ``stats.delivered`` and, through :meth:`_label`, its name in logs."""
        backoff_ms: float = self._settings.retry_min_backoff_ms
        failures = 0
        while True:
            entry = read(position)
            if entry is None:
                return self._discard(key, position, "its record is gone")
            phys, record = entry
            earlier = self._redelivered.pop(phys, None)
            if earlier is not None:
                self.stats.already_delivered += 1
                return True, earlier
            try:
                result = self._append(restore(record, phys))
            except (InvalidArgumentError, CodecError) as exc:
                return self._discard(key, position, str(exc))
            except (StoreError, OSError) as exc:
                self.stats.put_failures += 1
                if failures == 0:
                    label = self._label(key)
                    log.warning("%s: the store refused a delivery (%s); retrying", label, exc)
                failures += 1
                if await self._pause(backoff_ms / 1000):
                    return False, None
                backoff_ms = next_backoff(backoff_ms, self._settings.retry_max_backoff_ms)
                continue
            self._count(key, phys, due_ms)
            if failures:
                log.warning("%s: delivered after %d refusals", self._label(key), failures)
            return True, result

    def _count(self, key: int, phys: int, due_ms: int) -> None:
        stats = self.stats
        stats.lateness.observe(max(0, self._now_ms() - due_ms) / 1000)
        stats.delivered[key] = stats.delivered.get(key, 0) + 1
        if phys in self._redelivered:  # never, while _put skips them: a regression shows here
            del self._redelivered[phys]
            stats.redelivered_duplicates += 1

    def _claim(self, found: dict[int, Earlier], pending: Callable[[Earlier], bool]) -> None:
        """Keep the deliveries ``found`` at start whose entries the service has yet to reach
        (``pending``); the others lie behind its persisted progress."""
        self._redelivered = {
            origin: earlier.copy for origin, earlier in found.items() if pending(earlier)
        }

    def _earliest_copy(self) -> int | None:
        """Commit-log offset of the first copy of an entry still to be skipped (None: none).
        Entries whose record retention removed are forgotten: they are discarded, not due."""
        if not self._redelivered:
            return None
        low = self.store.commitlog.min_offset
        gone = [origin for origin in self._redelivered if origin < low]
        for origin in gone:
            del self._redelivered[origin]
        return min((copy.commit_log_offset for copy in self._redelivered.values()), default=None)

    def _discard(self, key: int, position: int, why: str) -> tuple[bool, None]:
        label = self._label(key)
        log.error("%s: skipping the entry at %s %d: %s", label, self.POSITION, position, why)
        self.stats.discarded += 1
        return True, None

    def _when_durable(
        self, end_offset: int, key: int, confirm: Callable[[], None]
    ) -> asyncio.Future[None]:
        """``confirm`` once the log counts as stored up to ``end_offset`` (durable, and on the
        in-sync replicas under Sync replication); the future waited on. The worker does not
        wait for it: the next due entry must not be late by an fsync or a replica."""
        durable = asyncio.wrap_future(self.store.stored(end_offset))

        def done(future: asyncio.Future[None]) -> None:
            if future.cancelled():
                return
            failure = future.exception()
            if isinstance(failure, ReplicaUnavailableError):
                # Stored here only: left unconfirmed, so a new master delivers them again
                # (a duplicate, never a loss). Counted by the replica set, not logged each.
                return
            if failure is not None:
                # The store turned read-only: these stay unconfirmed, so a restart (on
                # healthy storage) delivers them again.
                log.error("%s: deliveries not durable: %s", self._label(key), failure)
                return
            confirm()

        durable.add_done_callback(done)
        return durable

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` on a timer; returns True (early) when the service stops."""
        if self._stopping:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopped.wait()
        return self._stopping

    async def _persist_every(self) -> None:
        while not await self._pause(self._settings.persist_interval_ms / 1000):
            await self.persist()

    # ------------------------------------------------------------------ hooks
    POSITION = "offset"
    """What the position passed to :meth:`_put` is, in logs."""

    def _label(self, key: int) -> str:
        """The deliveries of ``key`` in logs (built only when something is logged)."""
        raise NotImplementedError

    def _wake_workers(self) -> None:
        """Wake workers that wait for appends, so that they see the service stopping."""
        raise NotImplementedError

    def _durable_futures(self) -> list[asyncio.Future[None]]:
        """The fsyncs of deliveries not confirmed yet."""
        raise NotImplementedError

    async def persist(self) -> None:
        """Write what was delivered now (atomically, off the event loop)."""
        raise NotImplementedError
