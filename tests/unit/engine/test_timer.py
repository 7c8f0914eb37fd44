"""The timer service over a real store in a temporary directory: delivery in due-time order
whatever the send order, an earlier entry overtaking a sleeping head, refused puts retried,
undeliverable entries skipped, and crashes re-running exactly the un-persisted deliveries,
which are found in the log and skipped (counted), while persisted out-of-order progress is
never repeated."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from reconsume.engine.delays import DelayLevels
from reconsume.engine.delivery import wall_ms
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.scheduled import schedule_tags_code
from reconsume.engine.timer import TimerService
from reconsume.engine.timer_message import TIMER_QUEUE_ID, timer_tags_code, to_timer
from reconsume.engine.timer_progress import load_progress, progress_path
from reconsume.message import properties as props
from reconsume.message.model import StoredMessage
from reconsume.message.names import TIMER_TOPIC
from reconsume.store import FlushMode, MessageStore, PutRequest

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

TAGS_CODE = timer_tags_code(schedule_tags_code(DelayLevels((1000,))))


def open_store(root: Path, tags_code: object = TAGS_CODE) -> MessageStore:
    return MessageStore(
        root,
        small_settings(flush_mode=FlushMode.SYNC, max_message_bytes=1024),
        tags_code=tags_code,  # type: ignore[arg-type]
        background=False,
    )


class Broker(ServiceBroker[TimerService]):
    """The broker around the timer service: timer puts wake it."""

    def __init__(self, store: MessageStore, settings: ScheduleSettings = FAST) -> None:
        super().__init__(store)
        self.service = TimerService(store, self.append, settings)

    def put_timer(self, body: bytes, due_ms: int, topic: str = "real") -> None:
        properties = {props.KEYS: body.decode()}
        where, queue_id = to_timer(properties, topic, 0, due_ms)
        self.store.append(PutRequest(where, queue_id, body, props.encode_properties(properties)))
        self.service.wake()

    def put_soon(self, body: bytes) -> None:
        self.put_timer(body, wall_ms() + 5)


def due_of(copy: StoredMessage) -> int:
    return int(copy.properties[props.TIMER_OUT_MS])


def saved_floor(root: Path) -> int | None:
    """The redelivery scan floor the timer progress holds."""
    return load_progress(progress_path(root / "config")).redelivery_scan_from


def test_messages_come_out_in_due_order_whatever_the_send_order(tmp_path: Path) -> None:
    async def scenario() -> list[StoredMessage]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            base = wall_ms() + 80
            offsets = list(range(0, 200, 5))
            random.Random(7).shuffle(offsets)
            for i, extra in enumerate(offsets):
                broker.put_timer(f"m{i}".encode(), base + extra)
            await until(lambda: len(broker.delivered()) == len(offsets))
            assert broker.service.pending() == 0
            await broker.service.stop()
            return broker.delivered()

    copies = asyncio.run(scenario())
    dues = [due_of(c) for c in copies]
    assert dues == sorted(dues)
    for copy in copies:
        assert copy.store_timestamp_ms >= due_of(copy)
        assert props.SCHEDULE_ORIGIN in copy.properties
        assert (copy.topic, copy.queue_id) == ("real", 0)


def test_an_earlier_entry_overtakes_the_sleeping_head(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[bytes], float, int]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            broker.put_timer(b"late", wall_ms() + 5_000)
            await asyncio.sleep(0.01)  # the worker sleeps until the late head
            started = time.monotonic()
            broker.put_timer(b"soon", wall_ms() + 30)
            await until(lambda: len(broker.delivered()) == 1)
            elapsed = time.monotonic() - started
            pending = broker.service.pending()
            await broker.service.stop()
            return [c.body for c in broker.delivered()], elapsed, pending

    bodies, elapsed, pending = asyncio.run(scenario())
    assert bodies == [b"soon"]
    assert pending == 1
    assert 0.028 <= elapsed < 0.5


def test_refused_puts_are_retried_at_the_same_entry(tmp_path: Path) -> None:
    async def scenario() -> tuple[Broker, list[bytes]]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            broker.refuse = 4
            await broker.service.start()
            due = wall_ms() + 10
            for i in range(5):
                broker.put_timer(f"m{i}".encode(), due + i)
            await until(lambda: len(broker.delivered()) == 5)
            await broker.service.stop()
            return broker, [c.body for c in broker.delivered()]

    broker, bodies = asyncio.run(scenario())
    assert bodies == [f"m{i}".encode() for i in range(5)]
    assert (broker.service.stats.put_failures, broker.service.stats.discarded) == (4, 0)


def test_an_entry_without_a_real_topic_is_skipped_and_counted(tmp_path: Path) -> None:
    async def scenario() -> tuple[Broker, list[bytes]]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await broker.service.start()
            broken = props.encode_properties({props.TIMER_OUT_MS: str(wall_ms())})
            store.append(PutRequest(TIMER_TOPIC, TIMER_QUEUE_ID, b"lost", broken))
            broker.put_timer(b"fine", wall_ms() + 5)
            await until(lambda: len(broker.delivered()) == 1)
            await broker.service.stop()
            return broker, [c.body for c in broker.delivered()]

    broker, bodies = asyncio.run(scenario())
    assert bodies == [b"fine"]
    assert broker.service.stats.discarded == 1


@pytest.mark.parametrize("clean_first", [False, True])
def test_a_crash_repeats_no_delivery_persisted_or_not(tmp_path: Path, clean_first: bool) -> None:
    """Entries are sent with due times out of order; some are delivered and persisted (the
    low-water mark sits below delivered entries), some delivered after the last persist, then
    the process dies. A restart finds the un-persisted ones delivered in the log and skips
    them (counted), and never reaches a persisted one."""
    far = 3_600_000

    async def first_run() -> tuple[set[bytes], set[bytes]]:
        store = open_store(tmp_path)
        broker = Broker(store)
        await broker.service.start()
        now = wall_ms()
        # Offsets 0..9: even ones due soon, odd ones far away (they stay waiting).
        for i in range(10):
            broker.put_timer(f"a{i}".encode(), now + (5 if i % 2 == 0 else far))
        await until(lambda: len(broker.delivered()) == 5)
        await broker.service.persist()
        persisted = {c.body for c in broker.delivered()}
        for i in range(10, 14):
            broker.put_timer(f"b{i}".encode(), wall_ms() + 5)
        await until(lambda: len(broker.delivered()) == 9)
        unpersisted = {c.body for c in broker.delivered()} - persisted
        if clean_first:
            await broker.service.stop()
            store.close()
        else:
            await crash(broker)
        return persisted, unpersisted

    async def run_again() -> tuple[list[bytes], tuple[int, int], int]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await run_until(broker, lambda: broker.service.pending() == 5)
            progress = load_progress(progress_path(tmp_path / "config"))
            stats = broker.service.stats
            return (
                broker.bodies(),
                (stats.already_delivered, stats.redelivered_duplicates),
                progress.low_water,
            )

    persisted, unpersisted = asyncio.run(first_run())
    assert (len(persisted), len(unpersisted)) == (5, 4)
    bodies, (skipped, duplicates), low_water = asyncio.run(run_again())
    assert sorted(bodies) == sorted(persisted | unpersisted)  # each once
    assert (skipped, duplicates) == (0 if clean_first else len(unpersisted), 0)
    assert low_water == 1  # offset 1 waits an hour: everything above is in the bitmap
    # A clean stop persisted everything: nothing is re-run.
    bodies, (skipped, duplicates), _ = asyncio.run(run_again())
    assert (len(bodies), skipped, duplicates) == (9, 0, 0)


def test_a_second_crash_before_the_skipped_entries_come_due_still_finds_their_copies(
    tmp_path: Path,
) -> None:
    async def start_then_crash() -> int | None:
        # The worker is created but the process dies before it runs: only the start-up write.
        broker = Broker(open_store(tmp_path))
        await broker.service.start()
        await crash(broker)
        return saved_floor(tmp_path)

    async def run_again() -> tuple[list[bytes], int, int]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await run_until(broker, lambda: broker.service.stats.already_delivered == 4)
            stats = broker.service.stats
            return broker.bodies(), stats.redelivered_duplicates, sum(stats.delivered.values())

    copies = asyncio.run(deliver_then_crash(Broker(open_store(tmp_path)), 4))
    floor = asyncio.run(start_then_crash())
    assert floor is not None
    assert floor <= copies[0]  # the next scan still covers every copy
    bodies, duplicates, delivered = asyncio.run(run_again())
    assert bodies == numbered(4)
    assert (duplicates, delivered) == (0, 0)


def test_copies_of_a_batch_held_up_by_a_refusal_bound_the_floor(tmp_path: Path) -> None:
    """Two deliveries appended, the third refused: a persist while the worker waits records a
    floor at or below the batch's first copy, so a crash then skips the two."""

    async def refused_mid_batch() -> tuple[list[int], int | None]:
        broker = Broker(open_store(tmp_path))
        broker.refuse_after = 2
        await broker.service.start()
        due = wall_ms() - 1  # all due at once: one batch
        for i, body in enumerate(numbered(5)):
            broker.put_timer(body, due + i)
        copies = await persist_while_refused(broker)
        await crash(broker)
        return copies, saved_floor(tmp_path)

    async def run_again() -> tuple[list[bytes], Broker]:
        with open_store(tmp_path) as store:
            broker = Broker(store)
            await run_until(
                broker, lambda: broker.service.pending() == 0 and len(broker.delivered()) >= 5
            )
            return broker.bodies(), broker

    copies, floor = asyncio.run(refused_mid_batch())
    assert len(copies) == 2
    assert floor is not None
    assert floor <= copies[0]
    bodies, broker = asyncio.run(run_again())
    assert bodies == numbered(5)
    stats = broker.service.stats
    assert (stats.already_delivered, stats.redelivered_duplicates) == (2, 0)
    assert sum(stats.delivered.values()) == 3


def test_an_entry_indexed_without_the_timer_hook_still_waits(tmp_path: Path) -> None:
    # As after a tool recovered the store with the default hook: tag code = TAGS hash (0).
    async def scenario() -> StoredMessage:
        with open_store(tmp_path, tags_code=schedule_tags_code(DelayLevels((1,)))) as store:
            broker = Broker(store)
            await broker.service.start()
            broker.put_timer(b"late", wall_ms() + 60)
            [(_phys, _size, tag)] = store.queue_entries(TIMER_TOPIC, 0, 0, 10)
            assert tag == 0
            await until(lambda: len(broker.delivered()) == 1)
            await broker.service.stop()
            [copy] = broker.delivered()
            return copy

    copy = asyncio.run(scenario())
    assert copy.store_timestamp_ms >= due_of(copy)
