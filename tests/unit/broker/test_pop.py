"""The pop engine over a real store: leases, acknowledgement, the committed offset, expiry into
the retry engine (a retry through the timer topic, or a dead letter), FIFO queues held by a
failing message, and receipt handles that expire."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconsume.broker.context import BrokerContext
from reconsume.broker.messaging import pop
from reconsume.broker.messaging.leases import Handle, Received
from reconsume.broker.messaging.pop import PopEngine
from reconsume.broker.messaging.status import Refused
from reconsume.broker.settings import BrokerSettings
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.message.decode import decode_record
from reconsume.message.names import TIMER_TOPIC, dead_letter_topic, retry_topic
from reconsume.store import MessageStore, PutRequest, StoreSettings
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.v2 import definition_pb2 as pb

from ...polling import eventually_async

TOPIC = "orders"
GROUP = "billing"


@contextmanager
def _context(root: Path) -> Iterator[BrokerContext]:
    store_settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    settings = BrokerSettings(store_dir=str(root), store=store_settings)
    host = HostAddress.parse("127.0.0.1:10911")
    with MessageStore(root, store_settings, store_host=host, background=False) as store:
        context = BrokerContext(settings, store, host, lambda: None)
        context.put_topic(TopicConfig(TOPIC, 2, 2))
        yield context


def _send(context: BrokerContext, queue_id: int, body: str, tag: str = "a", **extra: str) -> None:
    properties = {props.TAGS: tag, props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"id-{body}", **extra}
    context.append(PutRequest(TOPIC, queue_id, body.encode(), props.encode_properties(properties)))


def _group(context: BrokerContext, **changes: object) -> SubscriptionGroupConfig:
    config = SubscriptionGroupConfig(group_name=GROUP).with_changes(**changes)
    context.store.groups.put(GROUP, config)
    return config


def _take(
    engine: PopEngine,
    group: SubscriptionGroupConfig,
    batch: int = 32,
    invisible: int = 60_000,
    tags: frozenset[str] | None = None,
) -> list[Received]:
    return engine.take(group, engine.queues(GROUP, TOPIC, -1), tags, batch, invisible)


def _handle(received: Received) -> Handle:
    lease = received.lease
    return Handle(lease.topic, lease.queue_id, lease.offset, lease.token)


def _committed(context: BrokerContext, queue_id: int = 0) -> int | None:
    return context.store.consumer_offsets.get(consumer_offset_key(TOPIC, GROUP), queue_id)


def _stored(context: BrokerContext, topic: str) -> list[dict[str, str]]:
    found = []
    for queue_id in range(4):
        result = context.store.get_messages(topic, queue_id, 0, max_count=100)
        found.extend(dict(decode_record(r).properties) for r in result.records)
    return found


def test_acknowledged_messages_move_the_committed_offset_past_them_only(tmp_path: Path) -> None:
    with _context(tmp_path) as context:
        for i in range(3):
            _send(context, 0, f"m{i}")
        engine = PopEngine(lambda: context, lambda _client: True)
        group = _group(context)
        taken = _take(engine, group)
        assert [r.message.body for r in taken] == [b"m0", b"m1", b"m2"]
        assert [r.lease.attempt for r in taken] == [1, 1, 1]
        assert _take(engine, group) == []  # all leased: nothing more to hand out
        engine.ack(GROUP, _handle(taken[1]))
        assert _committed(context) == 0  # m0 is still leased
        engine.ack(GROUP, _handle(taken[0]))
        assert _committed(context) == 2
        with pytest.raises(Refused) as refused:
            engine.ack(GROUP, _handle(taken[0]))  # done already
        assert refused.value.code == pb.INVALID_RECEIPT_HANDLE
        engine.ack(GROUP, _handle(taken[2]))
        assert _committed(context) == 3


def test_a_tag_filter_skips_other_tags_and_they_count_as_done(tmp_path: Path) -> None:
    with _context(tmp_path) as context:
        _send(context, 0, "keep", tag="a")
        _send(context, 0, "skip", tag="b")
        engine = PopEngine(lambda: context, lambda _client: True)
        taken = _take(engine, _group(context), tags=frozenset({"a"}))
        assert [r.message.body for r in taken] == [b"keep"]
        engine.ack(GROUP, _handle(taken[0]))
        assert _committed(context) == 2


def test_a_changed_invisible_duration_gives_a_new_handle_and_the_old_one_expires(
    tmp_path: Path,
) -> None:
    with _context(tmp_path) as context:
        _send(context, 1, "m")
        engine = PopEngine(lambda: context, lambda _client: True)
        (received,) = _take(engine, _group(context))
        old = _handle(received)
        changed = engine.change_invisible(GROUP, old, 5_000)
        with pytest.raises(Refused):
            engine.ack(GROUP, old)
        engine.ack(GROUP, changed)
        assert _committed(context, 1) == 1
        assert Handle.decode(changed.encode("b")) == changed


def test_an_expired_lease_is_retried_at_once_then_dead_lettered(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        with _context(tmp_path) as context:
            _send(context, 0, "m")
            engine = PopEngine(lambda: context, lambda _client: True)
            engine.start()
            try:
                (received,) = _take(engine, _group(context, retry_max_times=1), invisible=20)
                # Due at once (the invisible duration was its delay): no stop at the timer.
                await eventually_async(lambda: _stored(context, retry_topic(GROUP)),
                                       what="the retry in %RETRY%<group>")  # fmt: skip
                (retry,) = _stored(context, retry_topic(GROUP))
                assert _stored(context, TIMER_TOPIC) == []
                assert props.REAL_TOPIC not in retry
                assert props.TIMER_OUT_MS not in retry
                assert retry[props.RETRY_TOPIC] == TOPIC
                assert retry[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "id-m"
                assert _committed(context) == 1  # taken back: done here
                # The retry's second attempt is the group's last: its expiry dead-letters it.
                lease = received.lease
                lease.attempt = 2
                cursor = engine._cursor(GROUP, TOPIC, 0)
                cursor.leases[lease.offset] = lease
                engine._expired(cursor, lease)
                (dead,) = _stored(context, dead_letter_topic(GROUP))
                assert dead[props.DLQ_ORIGIN_TOPIC] == TOPIC
                assert dead[props.DLQ_ORIGIN_MESSAGE_ID] == "id-m"
            finally:
                await engine.stop()

    asyncio.run(scenario())


def test_a_fifo_queue_waits_for_its_leased_message_which_comes_back_in_place(
    tmp_path: Path,
) -> None:
    with _context(tmp_path) as context:
        _send(context, 0, "first", **{props.SHARDING_KEY: "g"})
        _send(context, 0, "second", **{props.SHARDING_KEY: "g"})
        engine = PopEngine(lambda: context, lambda _client: True)
        fifo = _group(context, consume_message_orderly=True, retry_max_times=3)
        taken = _take(engine, fifo, batch=1)
        assert [r.message.body for r in taken] == [b"first"]
        assert _take(engine, fifo, batch=1) == []  # the queue is held
        cursor = engine._cursor(GROUP, TOPIC, 0)
        engine._expired(cursor, taken[0].lease)
        again = _take(engine, fifo, batch=1)
        assert [(r.message.body, r.lease.attempt) for r in again] == [(b"first", 2)]
        assert _stored(context, TIMER_TOPIC) == []  # redelivered in place, not retried
        engine.ack(GROUP, _handle(again[0]))
        assert [r.message.body for r in _take(engine, fifo, batch=1)] == [b"second"]


def test_auto_renewed_leases_last_while_their_client_is_connected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pop, "RENEW_MS", 30)

    async def scenario() -> None:
        with _context(tmp_path) as context:
            _send(context, 0, "m")
            connected = {"c1"}
            engine = PopEngine(lambda: context, lambda client: client in connected)
            engine.start()
            try:
                group = _group(context)
                taken = engine.take(group, engine.queues(GROUP, TOPIC, -1), None, 1, 20,
                                    client_id="c1", auto_renew=True)  # fmt: skip
                lease = taken[0].lease
                first_deadline = lease.deadline_ms
                # renewed several times (30 ms each) past its 20 ms; none took it back
                await eventually_async(
                    lambda: lease.deadline_ms >= first_deadline + 3 * 30,
                    what="three renewals of the lease",
                )
                assert lease.offset in engine._cursor(GROUP, TOPIC, 0).leases
                assert _stored(context, retry_topic(GROUP)) == []
                connected.clear()
                await eventually_async(
                    lambda: _stored(context, retry_topic(GROUP)),
                    what="the lease of a client that left taken back",
                )
            finally:
                await engine.stop()

    asyncio.run(scenario())


def test_handles_that_are_not_this_brokers_are_refused() -> None:
    for text in ("", "p1 b t 0 0", "x b t 0 0 1", "p1 b t q 0 1"):
        with pytest.raises(Refused) as refused:
            Handle.decode(text)
        assert refused.value.code == pb.INVALID_RECEIPT_HANDLE
