"""The timer service: delivers the entries of the timer topic at their due time, to the ms.

The durable log is the timer topic's consume queue (entries in send order, each with its due
time as tag code); the in-memory index is a binary heap of ``due_ms << 40 | queue offset``
(one int per waiting message; equal due times come out in send order). One task loads new
consume-queue entries into the heap (woken by :meth:`TimerService.wake` when the broker
appends to the timer topic), delivers every entry already due, then sleeps on an asyncio timer
set to the heap's head. Nothing polls. Why a heap and not a hierarchical wheel: see
``docs/architecture.md`` (exact order and millisecond precision at O(log n) per message in
C, where a wheel in Python pays interpreter time per bucket and per tick).

A delivery restores the real topic and queue (:func:`~reconsume.engine.scheduled.restore`,
so the message carries SCHEDULE_ORIGIN = its timer record's commit-log offset) and hands the
put to the broker's appender. A refused put (``StoreError``, ``OSError``) is retried at the
same entry with a growing backoff; an entry that cannot be delivered at all is logged, counted
and skipped.

Durability, as for delay levels but with a set instead of an offset
(:mod:`reconsume.engine.timer_progress`): a delivery joins the delivered set once durable
(Sync flush: when its fsync completes; Async: at once); the set and the redelivery scan floor
are written every ``persist_interval_ms``, at start and on stop. After a crash (or on a replica
taking over with the master's replicated progress), entries not in the persisted set come due
again; the start-up scan of the log from the floor finds which of them were delivered before,
and those are skipped, not delivered again: each joins the set once its earlier copy is stored,
and the floor stays at or below the copy until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections import deque
from collections.abc import Callable

from reconsume.engine.delivery import MIN_DUE_MS, Appender, DeliveryService, Entry, wall_ms
from reconsume.engine.redelivery import Earlier, delivered_origins
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.timer_message import TIMER_QUEUE_ID, due_of_properties
from reconsume.engine.timer_progress import (
    DeliveredSet,
    TimerProgress,
    load_progress,
    progress_path,
    save_progress,
)
from reconsume.errors import StoreError
from reconsume.message.decode import peek_routing
from reconsume.message.names import TIMER_TOPIC
from reconsume.store import MessageStore, PutResult

log = logging.getLogger(__name__)

OFFSET_BITS = 40
"""Heap keys are ``due_ms << OFFSET_BITS | queue offset``: 2^40 entries before offsets collide
with due times (a due time needs 43 bits until the year 2248)."""
OFFSET_MASK = (1 << OFFSET_BITS) - 1
LOAD_BATCH = 4096
"""Consume-queue entries indexed per pass: a long backlog is loaded between deliveries."""


class _Batch:
    """Deliveries appended together, joining the delivered set once durable."""

    __slots__ = ("done", "durable", "first_offset", "offsets")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        """Consume-queue offsets of the delivered (or skipped) entries."""
        self.first_offset: int | None = None
        """Lowest commit-log offset of the batch's copies, appended or found delivered before
        a restart (None: none)."""
        self.done = False
        self.durable: asyncio.Future[None] | None = None


class TimerService(DeliveryService):
    """Call :meth:`start` on the broker's event loop once the store is open, :meth:`stop`
    before closing it."""

    def __init__(
        self,
        store: MessageStore,
        append: Appender,
        settings: ScheduleSettings | None = None,
        *,
        now_ms: Callable[[], int] = wall_ms,
    ) -> None:
        super().__init__(store, append, settings, now_ms)
        # stats.delivered is keyed by 0 (the timer has no levels).
        self._path = progress_path(store.root / "config")
        saved = load_progress(self._path)
        self.scan_floor = saved.redelivery_scan_from
        """Commit-log offset a restart scans from for earlier deliveries (None: never ran)."""
        self._delivered: DeliveredSet = saved.delivered()
        self._heap: list[int] = []
        self._loaded = 0
        """The next consume-queue offset to index."""
        self._inflight: deque[_Batch] = deque()
        self._appended = asyncio.Event()
        self._persist_lock = asyncio.Lock()

    # ------------------------------------------------------------------ life cycle
    async def start(self, redelivered: dict[int, Earlier] | None = None) -> None:
        """Find what was delivered since the progress was persisted (unless the broker scanned
        for every service at once: ``redelivered``), then start delivering."""
        if redelivered is None:
            redelivered = {}
            if self.scan_floor is not None:
                redelivered = await asyncio.to_thread(
                    delivered_origins, self.store, self.scan_floor
                )
        low = self.store.min_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        high = self.store.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        if self._delivered.low > high:  # recovery cut entries the progress already counted
            log.warning("timer: progress %d beyond the queue's end %d", self._delivered.low, high)
            self._delivered = DeliveredSet(high)
        if self._delivered.low < low:
            log.warning("timer: entries %d-%d removed by retention", self._delivered.low, low - 1)
        self._loaded = max(self._delivered.low, low)
        self._claim(redelivered, self._pending)
        await self.persist()  # floors from now on: a crash before the first interval is covered
        self._tasks.append(asyncio.create_task(self._worker(self._run, 0), name="timer"))
        self._tasks.append(asyncio.create_task(self._persist_every(), name="timer-persist"))

    def _pending(self, earlier: Earlier) -> bool:
        """Whether the delivery found at start is of an entry not in the delivered set."""
        return (
            earlier.topic == TIMER_TOPIC
            and earlier.queue_id == TIMER_QUEUE_ID
            and earlier.queue_offset >= self._loaded
            and earlier.queue_offset not in self._delivered
        )

    def wake(self) -> None:
        """Something was appended to the timer topic."""
        self._appended.set()

    POSITION = "queue offset"

    def _label(self, key: int) -> str:
        return "timer"

    def _wake_workers(self) -> None:
        self._appended.set()

    def _durable_futures(self) -> list[asyncio.Future[None]]:
        return [b.durable for b in self._inflight if b.durable is not None]

    # ------------------------------------------------------------------ observation
    def pending(self) -> int:
        """Timer messages not delivered yet."""
        unloaded = self.store.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID) - self._loaded
        return len(self._heap) + max(0, unloaded)

    # ------------------------------------------------------------------ the worker
    async def _run(self) -> None:
        while not self._stopping:
            self._appended.clear()
            loaded_all = self._load(LOAD_BATCH)
            head_ms = await self._deliver_due()
            now = self._now_ms()
            if not loaded_all or (head_ms is not None and head_ms <= now):
                await asyncio.sleep(0)  # more to load or deliver: let requests in between
                continue
            timeout_s = None if head_ms is None else (head_ms - now) / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._appended.wait()

    def _load(self, limit: int) -> bool:
        """Index up to ``limit`` new consume-queue entries; returns whether none are left."""
        store = self.store
        high = store.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        offset = self._loaded
        stop = min(high, offset + limit)
        heap = self._heap
        delivered = self._delivered
        while offset < stop:
            # One call answers from one consume-queue file at most.
            entries = store.queue_entries(TIMER_TOPIC, TIMER_QUEUE_ID, offset, stop - offset)
            if not entries:
                first = store.min_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
                if offset < first:  # retention removed entries never delivered
                    log.error("timer: entries %d-%d removed before delivery", offset, first - 1)
                    self.stats.discarded += first - offset
                    offset = first
                    continue
                high = offset  # nothing readable here now: try again on the next wake
                break
            for phys, _size, due_ms in entries:
                if offset not in delivered:
                    if due_ms < MIN_DUE_MS:  # indexed without the timer hook
                        due_ms = self._due_from_record(phys)
                    heapq.heappush(heap, due_ms << OFFSET_BITS | offset)
                offset += 1
        self._loaded = offset
        return offset >= high

    def _due_from_record(self, phys: int) -> int:
        record = self.store.read_message(phys)
        if record is None:
            return 0  # due now: the delivery finds the record gone and skips it
        routing = peek_routing(record, 0)
        return due_of_properties(routing[4], routing[3])

    async def _deliver_due(self) -> int | None:
        """Deliver up to one batch of due entries, earliest first; returns the due time of the
        head afterwards (None: nothing waits)."""
        heap = self._heap
        batch = _Batch()
        last_end = -1
        try:
            for _ in range(self._settings.batch_size):
                if not heap:
                    break
                key = heap[0]
                due_ms = key >> OFFSET_BITS
                if due_ms > self._now_ms():
                    break
                offset = key & OFFSET_MASK
                advance, result = await self._deliver(offset, due_ms)
                if not advance:
                    break
                heapq.heappop(heap)
                batch.offsets.append(offset)
                if result is not None:
                    first = result.commit_log_offset  # a skipped entry's may precede the others
                    if batch.first_offset is None:
                        # From now on its copies bound the floor, while a refused put waits too.
                        self._inflight.append(batch)
                        batch.first_offset = first
                    batch.first_offset = min(batch.first_offset, first)
                    last_end = max(last_end, result.end_offset)
        finally:
            if batch.offsets:
                self._track(batch, last_end)
        return heap[0] >> OFFSET_BITS if heap else None

    async def _deliver(self, offset: int, due_ms: int) -> tuple[bool, PutResult | None]:
        return await self._put(self._read_entry, offset, due_ms, 0)

    def _read_entry(self, offset: int) -> Entry | None:
        entries = self.store.queue_entries(TIMER_TOPIC, TIMER_QUEUE_ID, offset, 1)
        record = self.store.read_message(entries[0][0]) if entries else None
        return None if record is None else (entries[0][0], record)

    def _track(self, batch: _Batch, last_end: int) -> None:
        """Add a delivered batch to the delivered set once it is durable."""
        if last_end < 0 or not self._sync:
            self._confirm(batch)
            return
        batch.durable = self._when_durable(last_end, 0, lambda: self._confirm(batch))

    def _confirm(self, batch: _Batch) -> None:
        batch.done = True
        for offset in batch.offsets:
            self._delivered.add(offset)
        inflight = self._inflight
        while inflight and inflight[0].done:
            inflight.popleft()

    # ------------------------------------------------------------------ persistence
    def snapshot(self) -> TimerProgress:
        """The progress to persist. The floor is the first unconfirmed copy, or the first copy
        of an entry still to be skipped, or else the log's end; taken together with the set on
        the event loop: every delivery of an entry outside the set lies at or past it."""
        floor = self.store.commitlog.write_offset
        earliest = self._earliest_copy()
        if earliest is not None:
            floor = min(floor, earliest)
        for batch in self._inflight:
            if not batch.done and batch.first_offset is not None:
                floor = min(floor, batch.first_offset)
        low, base, bits = self._delivered.snapshot()
        return TimerProgress(low, base, bits, floor)

    async def persist(self) -> None:
        """Write the progress now (atomically, off the event loop, in snapshot order)."""
        async with self._persist_lock:
            progress = self.snapshot()
            try:
                await asyncio.to_thread(save_progress, self._path, progress)
            except (OSError, StoreError) as exc:
                log.warning(
                    "persisting the timer progress failed (retrying next interval): %s", exc
                )
