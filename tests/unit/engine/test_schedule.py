"""The schedule service over a real store in a temporary directory: due-time delivery in
order, waking an idle level, refused puts retried at the same entry, undeliverable entries
skipped, and a crash re-running the un-persisted window without delivering anything twice:
the deliveries found in the log are skipped (and counted), their copies kept in reach of the
next scan until confirmed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from reconsume.engine.delays import DelayLevels, schedule_queue_id
from reconsume.engine.delivery import wall_ms
from reconsume.engine.redelivery import delivered_origins
from reconsume.engine.schedule import REDELIVERY_SCAN_KEY, ScheduleService
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.schedule_stats import Histogram
from reconsume.engine.scheduled import restore, schedule_tags_code, to_schedule
from reconsume.errors import StoreError
from reconsume.message import properties as props
from reconsume.message.decode import decode_record
from reconsume.message.model import StoredMessage
from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.store import FlushMode, MessageStore, PutRequest, PutResult

from ..store._helpers import small_settings
from ._crash_support import (
    FAST,
    ServiceBroker,
    crash,
    deliver_then_crash,
    numbered,
    persist_while_refused,
    run_until,
    until,
)

LEVELS = DelayLevels((40, 80))


def open_store(root: Path) -> MessageStore:
    return MessageStore(
        root,
        small_settings(flush_mode=FlushMode.SYNC),
        tags_code=schedule_tags_code(LEVELS),
        background=False,
    )


class Broker(ServiceBroker[ScheduleService]):
    """The broker around the schedule service: delayed puts wake it."""

    def __init__(self, store: MessageStore, settings: ScheduleSettings = FAST) -> None:
        super().__init__(store)
        self.service = ScheduleService(store, LEVELS, self.append, settings)

    def put_delayed(self, body: bytes, level: int, topic: str = "real") -> None:
        properties = {props.DELAY_TIME_LEVEL: str(level), props.KEYS: body.decode()}
        where, queue_id = to_schedule(properties, topic, 0, LEVELS)
        self.store.append(PutRequest(where, queue_id, body, props.encode_properties(properties)))
        self.service.wake(queue_id)

    def put_soon(self, body: bytes) -> None:
        self.put_delayed(body, 1)


def origin_record(store: MessageStore, copy: StoredMessage) -> StoredMessage:
    record = store.read_message(int(copy.properties[props.SCHEDULE_ORIGIN]))
    assert record is not None
    return decode_record(record)


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    histogram = Histogram((0.01, 0.1))
    for value in (0.0, 0.01, 0.05, 3.0):
        histogram.observe(value)
    assert histogram.cumulative() == [(0.01, 2), (0.1, 3), (float("inf"), 4)]
    assert histogram.count == 4
    assert histogram.sum == pytest.approx(3.06)


def test_due_messages_are_delivered_in_level_order_at_their_due_time(tmp_path: Path) -> None:
    async def scenario() -> tuple[Broker, list[StoredMessage]]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            for i in range(5):
                broker.put_delayed(f"slow{i}".encode(), 2)
                broker.put_delayed(f"fast{i}".encode(), 1)
            await until(lambda: len(broker.delivered()) == 10)
            copies = broker.delivered()
            assert broker.service.pending() == {1: 0, 2: 0}
            for copy in copies:
                scheduled = origin_record(store, copy)
                level = int(scheduled.properties[props.DELAY_TIME_LEVEL])
                waited = copy.store_timestamp_ms - scheduled.store_timestamp_ms
                assert waited >= LEVELS.delay_ms(level)
            await broker.service.stop()
            return broker, copies

    broker, copies = asyncio.run(scenario())
    bodies = [c.body.decode() for c in copies]
    assert [b for b in bodies if b.startswith("fast")] == [f"fast{i}" for i in range(5)]
    assert [b for b in bodies if b.startswith("slow")] == [f"slow{i}" for i in range(5)]
    assert bodies.index("fast4") < bodies.index("slow0")  # the shorter level came first
    stats = broker.service.stats
    assert stats.delivered == {1: 5, 2: 5}
    assert stats.lateness.count == 10
    assert (stats.put_failures, stats.discarded, stats.redelivered_duplicates) == (0, 0, 0)
    for copy in copies:
        assert props.DELAY_TIME_LEVEL not in copy.properties
        assert (copy.topic, copy.queue_id) == ("real", 0)


def test_an_idle_level_wakes_when_something_is_appended(tmp_path: Path) -> None:
    async def scenario() -> float:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            await asyncio.sleep(0)  # one turn: each worker finds its queue empty and waits
            started = time.monotonic()
            broker.put_delayed(b"one", 1)
            await until(lambda: len(broker.delivered()) == 1)
            elapsed = time.monotonic() - started
            await broker.service.stop()
            return elapsed

    elapsed = asyncio.run(scenario())
    assert LEVELS.delay_ms(1) / 1000 - 0.002 <= elapsed < LEVELS.delay_ms(1) / 1000 + 0.5


@pytest.mark.parametrize("refusal", [StoreError("read-only"), OSError(27, "File too large")])
def test_refused_puts_are_retried_at_the_same_entry(tmp_path: Path, refusal: Exception) -> None:
    async def scenario() -> tuple[Broker, list[StoredMessage]]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            broker.refuse, broker.refusal = 4, refusal
            await broker.service.start()
            for i in range(5):
                broker.put_delayed(f"m{i}".encode(), 1)
            await until(lambda: len(broker.delivered()) == 5)
            await broker.service.stop()
            return broker, broker.delivered()

    broker, copies = asyncio.run(scenario())
    assert [c.body for c in copies] == [f"m{i}".encode() for i in range(5)]
    assert broker.service.stats.put_failures == 4
    assert broker.service.stats.discarded == 0


def test_an_entry_without_a_real_topic_is_skipped_and_counted(tmp_path: Path) -> None:
    async def scenario() -> tuple[Broker, list[StoredMessage]]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            broken = props.encode_properties({props.DELAY_TIME_LEVEL: "1"})
            store.append(PutRequest(SCHEDULE_TOPIC, schedule_queue_id(1), b"lost", broken))
            broker.put_delayed(b"fine", 1)
            await until(lambda: len(broker.delivered()) == 1)
            await broker.service.stop()
            return broker, broker.delivered()

    broker, copies = asyncio.run(scenario())
    assert [c.body for c in copies] == [b"fine"]
    assert broker.service.stats.discarded == 1


async def run_to_the_end(root: Path) -> tuple[list[bytes], Broker, dict[int, int]]:
    """Start, deliver everything due, stop cleanly: the bodies delivered (all runs), the
    broker and the persisted scan floors."""
    with open_store(root) as store:
        broker = Broker(store)
        await run_until(broker, lambda: broker.service.pending() == {1: 0, 2: 0})
        floors = store.schedule_offsets.queues(REDELIVERY_SCAN_KEY)
        return broker.bodies(), broker, floors


def test_a_crash_skips_the_deliveries_already_in_the_log(tmp_path: Path) -> None:
    asyncio.run(deliver_then_crash(Broker(open_store(tmp_path)), 5))
    bodies, broker, floors = asyncio.run(run_to_the_end(tmp_path))
    stats = broker.service.stats
    assert bodies == numbered(5)  # each once: none lost, none twice
    assert (stats.already_delivered, stats.redelivered_duplicates, stats.delivered) == (5, 0, {})
    assert set(floors) == {1, 2}
    # Stopped cleanly this time: a restart finds nothing to skip.
    bodies, broker, _ = asyncio.run(run_to_the_end(tmp_path))
    assert len(bodies) == 5
    assert broker.service.stats.already_delivered == 0


def test_a_second_crash_before_the_skipped_entries_come_due_still_finds_their_copies(
    tmp_path: Path,
) -> None:
    async def start_then_crash() -> dict[int, int]:
        # The workers are created but crash before they run: only the start-up write happened.
        broker = Broker(open_store(tmp_path))
        await broker.service.start()
        floors = broker.store.schedule_offsets.queues(REDELIVERY_SCAN_KEY)
        await crash(broker)
        return floors

    copies = asyncio.run(deliver_then_crash(Broker(open_store(tmp_path)), 5))
    floors = asyncio.run(start_then_crash())
    assert max(floors.values()) <= copies[0] < copies[-1]  # the next scan covers every copy
    bodies, broker, _ = asyncio.run(run_to_the_end(tmp_path))
    assert bodies == numbered(5)
    stats = broker.service.stats
    assert (stats.already_delivered, stats.redelivered_duplicates) == (5, 0)


def test_copies_of_a_batch_held_up_by_a_refusal_bound_the_floor(tmp_path: Path) -> None:
    """Two deliveries appended, the third refused: a persist while the worker waits records a
    floor at or below the batch's first copy, so a crash then skips the two."""

    async def refused_mid_batch() -> tuple[list[int], dict[int, int]]:
        store = open_store(tmp_path)
        broker = Broker(store)
        # An hour ahead: the five entries are all due at once, one batch delivers them.
        broker.service = ScheduleService(
            store, LEVELS, broker.append, FAST, now_ms=lambda: wall_ms() + 3_600_000
        )
        await broker.service.start()
        for body in numbered(5):
            schedule_record(store, body)
        broker.refuse_after = 2
        broker.service.wake(schedule_queue_id(1))
        copies = await persist_while_refused(broker)
        floors = store.schedule_offsets.queues(REDELIVERY_SCAN_KEY)
        await crash(broker)
        return copies, floors

    copies, floors = asyncio.run(refused_mid_batch())
    assert len(copies) == 2
    assert min(floors.values()) <= copies[0]
    bodies, broker, _ = asyncio.run(run_to_the_end(tmp_path))
    assert bodies == numbered(5)
    stats = broker.service.stats
    assert (stats.already_delivered, stats.redelivered_duplicates, stats.delivered) == (
        2,
        0,
        {1: 3},
    )


def schedule_record(store: MessageStore, body: bytes, level: int = 1) -> int:
    """Store a delayed message; its schedule record's commit-log offset."""
    return store.append(PutRequest(*to_schedule_request(body.decode(), level))).commit_log_offset


def to_schedule_request(key: str, level: int) -> tuple[str, int, bytes, str]:
    properties = {props.DELAY_TIME_LEVEL: str(level), props.KEYS: key}
    where, queue_id = to_schedule(properties, "real", 0, LEVELS)
    return where, queue_id, key.encode(), props.encode_properties(properties)


def deliver(store: MessageStore, phys: int) -> PutResult:
    record = store.read_message(phys)
    assert record is not None
    return store.append(restore(record, phys))


def test_delivered_origins_are_found_across_segments(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        scheduled = [schedule_record(store, f"m{i}".encode()) for i in range(20)]
        copies = {}
        for phys in scheduled:  # records of ~200 bytes in 2 KiB segments: many blanks
            copies[phys] = deliver(store, phys).commit_log_offset
            store.append(PutRequest("real", 0, b"x" * 40, ""))
        assert len(store.commitlog.segments) > 2
        found = delivered_origins(store, 0)
        assert {o: e.copy.commit_log_offset for o, e in found.items()} == copies
        assert {(e.topic, e.queue_offset) for e in found.values()} == {
            (SCHEDULE_TOPIC, n) for n in range(20)
        }
        later = delivered_origins(store, copies[scheduled[15]])
        assert set(later) == set(scheduled[15:])
        assert delivered_origins(store, store.commitlog.write_offset) == {}


def test_only_a_copy_of_the_scheduled_message_counts_as_its_delivery(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        pending, delivered = (schedule_record(store, body) for body in (b"p", b"d"))
        deliver(store, delivered)
        # Client messages naming a pending record (another body, or born at another time),
        # or no schedule record at all.
        for origin, body, born in ((pending, b"q", 0), (pending, b"p", 7), (pending + 1, b"p", 0)):
            extra = props.encode_properties({props.SCHEDULE_ORIGIN: str(origin)})
            store.append(PutRequest("real", 0, body, extra, born_timestamp_ms=born))
        # A send-back of the delivered copy: its schedule record keeps the origin it carried.
        copy = store.get_messages("real", 0, 0, max_count=1).records[0]
        retried = decode_record(copy).properties
        retried[props.DELAY_TIME_LEVEL] = "2"
        where, queue_id = to_schedule(retried, "%RETRY%g", 0, LEVELS)
        store.append(PutRequest(where, queue_id, b"d", props.encode_properties(retried)))
        assert set(delivered_origins(store, 0)) == {delivered}


def test_an_entry_indexed_without_the_schedule_hook_still_waits_its_delay(
    tmp_path: Path,
) -> None:
    # As after a tool recovered the store with the default hook: tag code = TAGS hash (0).
    async def scenario() -> list[StoredMessage]:
        settings = small_settings(flush_mode=FlushMode.SYNC)
        with MessageStore(tmp_path, settings, background=False) as store:
            broker = Broker(store)
            await broker.service.start()
            broker.put_delayed(b"late", 2)
            [(_phys, _size, tag)] = store.queue_entries(SCHEDULE_TOPIC, 1, 0, 10)
            assert tag == 0
            await until(lambda: len(broker.delivered()) == 1)
            await broker.service.stop()
            [copy] = broker.delivered()
            waited = copy.store_timestamp_ms - origin_record(store, copy).store_timestamp_ms
            assert waited >= LEVELS.delay_ms(2)
            return [copy]

    assert len(asyncio.run(scenario())) == 1
