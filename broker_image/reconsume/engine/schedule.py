"""The schedule service: delivers the entries of ``SCHEDULE_TOPIC_XXXX`` when they are due.

One worker per delay level reads its queue in order (one delay per level, so the queue is
ordered by due time). It delivers every entry already due, then sleeps on an asyncio timer
set to the head's due time; on an empty queue it sleeps until :meth:`ScheduleService.wake`
says something was appended. Nothing polls.

A delivery restores the real topic and queue (:func:`~reconsume.engine.scheduled.restore`)
and hands the put to the broker's appender, which wakes long-polling pulls. A put the store
refuses (``StoreError``, ``OSError`` such as a full disk) is retried at the same entry with
a growing backoff: nothing is skipped. An entry that can never be delivered (its record gone,
no valid real topic, refused as invalid) is logged, counted and skipped, as RocketMQ does.

Durability: a level's *confirmed* offset moves past a delivery only once it is durable (under
Sync flush, when the fsync covering it completes, which the worker does not wait for; under
Async, at once). Every ``persist_interval_ms`` the confirmed offsets go to
``delayOffset.json`` together with the commit-log offset from which a restart must scan for
earlier deliveries (see :mod:`reconsume.engine.redelivery`); after a crash (or on a replica
taking over with the master's replicated offsets) each level resumes at its persisted offset,
and an entry whose earlier delivery is found in the log is skipped, not delivered again: it is
confirmed once that copy is stored, and the scan floor stays at or below the copy until then.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from reconsume.engine.delays import DelayLevels, level_of_queue, schedule_queue_id
from reconsume.engine.delivery import MIN_DUE_MS, Appender, DeliveryService, Entry, wall_ms
from reconsume.engine.redelivery import Earlier, delivered_origins
from reconsume.engine.schedule_state import Batch, LevelState, ScheduleSettings
from reconsume.engine.scheduled import correct_due_ms
from reconsume.errors import StoreError
from reconsume.message.decode import peek_routing
from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.store import MessageStore, PutResult

log = logging.getLogger(__name__)

REDELIVERY_SCAN_KEY = "redeliveryScanFrom"
"""Key in ``delayOffset.json`` of {level: commit-log offset a restart scans from}. The
offsets themselves are under the level (``"3"``) and its queue id (2)."""


class ScheduleService(DeliveryService):
    """Call :meth:`start` on the broker's event loop once the store is open, :meth:`stop`
    before closing it."""

    def __init__(
        self,
        store: MessageStore,
        levels: DelayLevels,
        append: Appender,
        settings: ScheduleSettings | None = None,
        *,
        now_ms: Callable[[], int] = wall_ms,
    ) -> None:
        super().__init__(store, append, settings, now_ms)
        self.levels = levels
        self._table = store.schedule_offsets
        self._states: dict[int, LevelState] = {}
        """By schedule queue id."""

    # ------------------------------------------------------------------ life cycle
    def scan_floor(self) -> int | None:
        """The commit-log offset a restart scans from for earlier deliveries (None: none)."""
        floors = self._table.queues(REDELIVERY_SCAN_KEY)
        return min(floors.values()) if floors else None

    async def start(self, redelivered: dict[int, Earlier] | None = None) -> None:
        """Load the offsets, find what was delivered since they were persisted (unless the
        broker scanned once for every service: ``redelivered``), start."""
        existing = {level_of_queue(q) for q in self.store.queue_ids(SCHEDULE_TOPIC)}
        for level in sorted(set(self.levels.levels()) | existing):
            state = LevelState(level, self.levels.delay_ms(level), self._saved_offset(level))
            self._states[state.queue_id] = state
        if redelivered is None:
            floor = self.scan_floor()
            redelivered = {}
            if floor is not None:
                redelivered = await asyncio.to_thread(delivered_origins, self.store, floor)
        self._claim(redelivered, self._pending)
        # Floors from now on: a crash before the first interval must find what is delivered.
        await self.persist()
        for state in self._states.values():
            run = self._worker(functools.partial(self._run, state), state.level)
            self._tasks.append(asyncio.create_task(run, name=f"schedule-{state.level}"))
        self._tasks.append(asyncio.create_task(self._persist_every(), name="schedule-persist"))

    def _pending(self, earlier: Earlier) -> bool:
        """Whether the delivery found at start is of an entry a level has yet to reach."""
        state = self._states.get(earlier.queue_id)
        return (
            earlier.topic == SCHEDULE_TOPIC
            and state is not None
            and earlier.queue_offset >= state.cursor
        )

    def _saved_offset(self, level: int) -> int:
        queue_id = schedule_queue_id(level)
        low = self.store.min_offset(SCHEDULE_TOPIC, queue_id)
        high = self.store.max_offset(SCHEDULE_TOPIC, queue_id)
        saved = self._table.get(str(level), queue_id)
        return low if saved is None else min(max(saved, low), high)

    def wake(self, queue_id: int) -> None:
        """Something was appended to schedule queue ``queue_id``."""
        state = self._states.get(queue_id)
        if state is not None:
            state.appended.set()

    POSITION = "commit-log offset"

    def _label(self, key: int) -> str:
        return f"schedule level {key}"

    def _wake_workers(self) -> None:
        for state in self._states.values():
            state.appended.set()

    def _durable_futures(self) -> list[asyncio.Future[None]]:
        return [b.durable for s in self._states.values() for b in s.inflight if b.durable]

    # ------------------------------------------------------------------ observation
    def pending(self) -> dict[int, int]:
        """Entries not delivered yet, per level."""
        return {
            state.level: max(
                0, self.store.max_offset(SCHEDULE_TOPIC, state.queue_id) - state.cursor
            )
            for state in self._states.values()
        }

    def offsets(self) -> dict[int, int]:
        """The next entry each level delivers."""
        return {state.level: state.cursor for state in self._states.values()}

    # ------------------------------------------------------------------ workers
    async def _run(self, state: LevelState) -> None:
        while not self._stopping:
            state.appended.clear()
            entries = self.store.queue_entries(
                SCHEDULE_TOPIC, state.queue_id, state.cursor, self._settings.batch_size
            )
            if not entries:
                if not self._correct_cursor(state):
                    await state.appended.wait()
                continue
            due_ms = await self._deliver_due(state, entries)
            if due_ms is not None:
                await self._sleep_until(due_ms)

    def _correct_cursor(self, state: LevelState) -> bool:
        """Move a cursor that lies outside the queue (entries removed by retention, a log cut
        by recovery) back inside; returns whether it moved."""
        low = self.store.min_offset(SCHEDULE_TOPIC, state.queue_id)
        high = self.store.max_offset(SCHEDULE_TOPIC, state.queue_id)
        if low <= state.cursor <= high:
            return False
        log.warning(
            "schedule level %d: offset %d outside [%d, %d]; continuing from %d",
            state.level, state.cursor, low, high, min(max(state.cursor, low), high),
        )  # fmt: skip
        state.cursor = state.confirmed = min(max(state.cursor, low), high)
        return True

    async def _deliver_due(
        self, state: LevelState, entries: list[tuple[int, int, int]]
    ) -> int | None:
        """Deliver the entries already due, in order (confirmed later, when durable). Returns
        the due time of the first entry not due yet, None when every entry was delivered."""
        batch = Batch(state.cursor, None)
        state.inflight.append(batch)  # its copies bound the floor while a refusal waits
        last_end = -1
        not_due: int | None = None
        try:
            for phys, _size, tag_due_ms in entries:
                if tag_due_ms < MIN_DUE_MS:
                    tag_due_ms = self._due_from_record(state, phys)
                now = self._now_ms()
                due_ms = correct_due_ms(tag_due_ms, now, state.delay_ms)
                if due_ms > now:
                    not_due = due_ms
                    break
                advance, result = await self._deliver(state, phys, due_ms)
                if not advance:
                    break
                state.cursor += 1
                if result is not None:
                    first = result.commit_log_offset  # a skipped entry's may precede the others
                    if batch.first_offset is None:
                        batch.first_offset = first
                    batch.first_offset = min(batch.first_offset, first)
                    last_end = max(last_end, result.end_offset)
        finally:
            batch.cursor = state.cursor
            self._track(state, batch, last_end)
        return not_due

    def _due_from_record(self, state: LevelState, phys: int) -> int:
        record = self.store.read_message(phys)
        if record is None:
            return 0  # due now: the delivery finds the record gone and skips it
        return peek_routing(record, 0)[3] + state.delay_ms

    async def _deliver(
        self, state: LevelState, phys: int, due_ms: int
    ) -> tuple[bool, PutResult | None]:
        return await self._put(self._read_record, phys, due_ms, state.level)

    def _read_record(self, phys: int) -> Entry | None:
        record = self.store.read_message(phys)
        return None if record is None else (phys, record)

    def _track(self, state: LevelState, batch: Batch, last_end: int) -> None:
        """Confirm a delivered batch once it is durable."""
        if last_end < 0 or not self._sync:
            batch.done = True
            self._drain(state)
            return

        def confirm() -> None:
            batch.done = True
            self._drain(state)

        batch.durable = self._when_durable(last_end, state.level, confirm)

    @staticmethod
    def _drain(state: LevelState) -> None:
        while state.inflight and state.inflight[0].done:
            state.confirmed = state.inflight.popleft().cursor

    async def _sleep_until(self, due_ms: int) -> None:
        while not self._stopping:
            remaining_ms = due_ms - self._now_ms()
            if remaining_ms <= 0:
                return
            await self._pause(remaining_ms / 1000)

    # ------------------------------------------------------------------ persistence
    def record_offsets(self) -> None:
        """Put the confirmed offsets, then the scan floors, into the offset table (in that
        order: a table snapshot taken in between pairs new offsets with older, lower floors,
        which only widens the scan)."""
        end = self.store.commitlog.write_offset
        earliest = self._earliest_copy()
        if earliest is not None:  # copies of entries to skip: a crash must find them again
            end = min(end, earliest)
        table = self._table
        for state in self._states.values():
            if table.get(str(state.level), state.queue_id) != state.confirmed:
                table.set(str(state.level), state.queue_id, state.confirmed)
        for state in self._states.values():
            floor = end if state.unconfirmed is None else min(end, state.unconfirmed)
            if table.get(REDELIVERY_SCAN_KEY, state.level) != floor:
                table.set(REDELIVERY_SCAN_KEY, state.level, floor)

    async def persist(self) -> None:
        """Write the offsets now (atomically, off the event loop)."""
        self.record_offsets()
        try:
            await asyncio.to_thread(self._table.persist)
        except (OSError, StoreError) as exc:
            log.warning("persisting schedule offsets failed (retrying next interval): %s", exc)
