"""Consumer retries end to end: real PushConsumer and Producer against two real brokers with
millisecond delay levels. Send-back, the schedule service, %RETRY% and %DLQ%."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeFrom, ConsumeStatus
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.client.settings import DEFAULT_SETTINGS, ConsumerSettings
from reconsume.message import properties as props
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic

from .cluster import Cluster, create_topic, send_all, settled
from .retry_support import TEST_DELAYS_MS, TIMESTAMP_SLACK_S, read_queue, retry_cluster, total
from .wire_client import BrokerClient, eventually

TOPIC = "payments"
GROUP = "payments-consumer"
QUEUES_PER_BROKER = 2
ALL_QUEUES = 2 * QUEUES_PER_BROKER + 2
"""The topic's queues and the retry topic's queue, on both brokers."""

Delivery = tuple[float, int, str]
"""(monotonic time, reconsume times, topic the listener saw)."""


async def dead_letters(cluster: Cluster, group: str = GROUP) -> list[StoredMessage]:
    async with BrokerClient() as client:
        found: list[StoredMessage] = []
        for broker in cluster.brokers.values():
            found += await read_queue(client, broker.address, dead_letter_topic(group))
        return found


def consumer(
    cluster: Cluster, listener: object, settings: ConsumerSettings = DEFAULT_SETTINGS
) -> PushConsumer:
    settings = replace(settings, instance_name="retry-test")
    c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
    c.subscribe(TOPIC)
    c.register_listener(listener)  # type: ignore[arg-type]
    return c


async def send_messages(cluster: Cluster, count: int) -> list[SendResult]:
    async with Producer(cluster.name_servers) as producer:
        return await send_all(producer, (Message(TOPIC, f"m{i}".encode()) for i in range(count)))


def test_always_failing_messages_retry_at_each_level_then_dead_letter_once(
    tmp_path: Path,
) -> None:
    max_times = 3
    count = 20
    deliveries: dict[str, list[Delivery]] = defaultdict(list)

    async def always_fail(messages: list[StoredMessage], context: ConcurrentContext) -> None:
        now = time.monotonic()
        for m in messages:
            assert m.uniq_key is not None
            deliveries[m.uniq_key].append((now, m.reconsume_times, m.topic))
        return None  # counts as RECONSUME_LATER

    async def scenario(cluster: Cluster) -> tuple[list[SendResult], list[StoredMessage]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, QUEUES_PER_BROKER)
            settings = ConsumerSettings(max_reconsume_times=max_times)
            async with consumer(cluster, always_fail, settings) as c:
                await settled([c], ALL_QUEUES)
                sent = await send_messages(cluster, count)
                wanted = 1 + max_times

                async def all_dead() -> bool:
                    return len(await dead_letters(cluster)) >= count

                await eventually(all_dead, 30, what="every message dead-lettered")
                # A dead letter is never delivered again: its deliveries are complete.
                assert {k: len(v) for k, v in deliveries.items()} == {
                    r.msg_id: wanted for r in sent
                }
            brokers = list(cluster.brokers.values())
            labels = {"group": GROUP, "origin_topic": TOPIC}
            assert await total(brokers, "reconsume_send_back_total", **labels) == count * wanted
            assert await total(brokers, "reconsume_dead_letters_total", **labels) == count
            assert await total(brokers, "reconsume_dead_letter_depth", group=GROUP) == count

            async def retries_consumed() -> bool:
                return await total(brokers, "reconsume_retry_depth", group=GROUP) == 0

            await eventually(retries_consumed, what="retry depth back to 0 after shutdown")
            for broker in brokers:
                config = (await admin.topic_configs(broker.address))[dead_letter_topic(GROUP)]
                assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)
            return sent, await dead_letters(cluster)

    with retry_cluster(tmp_path) as cluster:
        sent, dlq = asyncio.run(scenario(cluster))

    for key, seen in deliveries.items():
        assert [times for _, times, _ in seen] == list(range(1 + max_times)), key
        assert {topic for _, _, topic in seen} == {TOPIC}  # retries restored to their topic
        for attempt, ((before, _, _), (after, _, _)) in enumerate(itertools.pairwise(seen)):
            level = 3 + attempt  # the broker's choice: 3 + reconsumeTimes
            assert after - before >= TEST_DELAYS_MS[level - 1] / 1000 - TIMESTAMP_SLACK_S, (
                key,
                attempt,
                after - before,
            )
    by_key = Counter(m.uniq_key for m in dlq)
    assert by_key == Counter(r.msg_id for r in sent)  # each exactly once
    offset_ids = {r.msg_id: r.offset_msg_id for r in sent}
    for m in dlq:
        assert m.uniq_key is not None
        assert m.topic == dead_letter_topic(GROUP)
        assert m.reconsume_times == max_times + 1
        p = m.properties
        assert p[props.ORIGIN_MESSAGE_ID] == offset_ids[m.uniq_key]
        assert p[props.RETRY_TOPIC] == TOPIC
        assert p[props.DLQ_ORIGIN_TOPIC] == TOPIC
        assert p[props.DLQ_ORIGIN_MESSAGE_ID] == m.uniq_key
        assert p[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
        assert int(p[props.DLQ_TIME_MS]) >= m.born_timestamp_ms
        assert p.get(props.DELAY_TIME_LEVEL, "0") == "0"


def test_fail_twice_then_succeed_is_delivered_three_times(tmp_path: Path) -> None:
    count = 10
    deliveries: Counter[str] = Counter()

    def fail_twice(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        for m in messages:
            assert m.uniq_key is not None
            deliveries[m.uniq_key] += 1
        if messages[0].reconsume_times < 2:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario(cluster: Cluster) -> list[SendResult]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, QUEUES_PER_BROKER)
            async with consumer(cluster, fail_twice) as c:
                await settled([c], ALL_QUEUES)
                sent = await send_messages(cluster, count)

                async def three_each() -> bool:
                    return len(deliveries) == count and min(deliveries.values()) >= 3

                await eventually(three_each, 20, what="three deliveries each")

                async def nothing_pending() -> bool:
                    brokers = list(cluster.brokers.values())
                    sent_back = await total(
                        brokers, "reconsume_send_back_total", group=GROUP, origin_topic=TOPIC
                    )
                    pending = [
                        await total(brokers, "reconsume_schedule_pending", level=str(level))
                        for level in (3, 4)
                    ]
                    return sent_back == 2 * count and sum(pending) == 0

                # Every retry has been delivered, so no fourth delivery can come.
                await eventually(nothing_pending, what="every retry delivered")
            return sent

    with retry_cluster(tmp_path) as cluster:
        sent = asyncio.run(scenario(cluster))
        assert asyncio.run(dead_letters(cluster)) == []
    assert deliveries == Counter({r.msg_id: 3 for r in sent})


def test_partial_ack_index_retries_only_the_messages_after_it(tmp_path: Path) -> None:
    count = 40
    first_batches: list[list[str]] = []
    retried: Counter[str] = Counter()

    def ack_half(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        keys = [m.uniq_key or "" for m in messages]
        if messages[0].reconsume_times > 0:
            retried.update(keys)
            return ConsumeStatus.CONSUME_SUCCESS
        first_batches.append(keys)
        context.ack_index = len(messages) // 2 - 1  # the first half succeeded
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario(cluster: Cluster) -> None:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, QUEUES_PER_BROKER)
            await send_messages(cluster, count)  # before the consumer: full batches
            settings = ConsumerSettings(batch_size=4, consume_from=ConsumeFrom.FIRST_OFFSET)
            async with consumer(cluster, ack_half, settings) as c:
                await settled([c], ALL_QUEUES)

                async def retried_all() -> bool:
                    failed = [k for batch in first_batches for k in batch[len(batch) // 2 :]]
                    return sum(len(b) for b in first_batches) == count and set(retried) == set(
                        failed
                    )

                await eventually(retried_all, 20, what="the failed halves retried")

    with retry_cluster(tmp_path) as cluster:
        asyncio.run(scenario(cluster))
    assert any(len(batch) > 1 for batch in first_batches)
    acked = {k for batch in first_batches for k in batch[: len(batch) // 2]}
    failed = {k for batch in first_batches for k in batch[len(batch) // 2 :]}
    assert not acked & set(retried)
    assert set(retried) == failed
    assert max(retried.values()) == 1


def test_delay_level_minus_one_dead_letters_at_once(tmp_path: Path) -> None:
    count = 10
    deliveries: Counter[str] = Counter()

    def straight_to_dlq(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        deliveries.update(m.uniq_key or "" for m in messages)
        context.delay_level_when_next_consume = -1
        return ConsumeStatus.RECONSUME_LATER

    async def scenario(cluster: Cluster) -> tuple[list[SendResult], list[StoredMessage]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, QUEUES_PER_BROKER)
            async with consumer(cluster, straight_to_dlq) as c:
                await settled([c], ALL_QUEUES)
                sent = await send_messages(cluster, count)

                async def all_dead() -> list[StoredMessage] | None:
                    found = await dead_letters(cluster)
                    return found if len(found) >= count else None

                dlq: list[StoredMessage] = await eventually(all_dead, 20, what="dead letters")
            brokers = list(cluster.brokers.values())
            # Never through the schedule topic: nothing was delayed.
            delivered = [
                await total(brokers, "reconsume_schedule_delivered_total", level=str(level))
                for level in range(1, len(TEST_DELAYS_MS) + 1)
            ]
            assert sum(delivered) == 0
            return sent, dlq

    with retry_cluster(tmp_path) as cluster:
        sent, dlq = asyncio.run(scenario(cluster))
    assert deliveries == Counter({r.msg_id: 1 for r in sent})
    assert sorted(m.uniq_key or "" for m in dlq) == sorted(r.msg_id for r in sent)
    for m in dlq:
        assert m.reconsume_times == 1
        assert m.properties[props.DLQ_REASON] == "CONSUMER_REQUESTED"
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == TOPIC


def test_a_delay_level_send_arrives_after_its_delay(tmp_path: Path) -> None:
    level = 5
    arrivals: dict[str, tuple[float, StoredMessage]] = {}

    def collect(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        now = time.monotonic()
        for m in messages:
            arrivals[m.uniq_key or ""] = (now, m)
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario(cluster: Cluster) -> dict[str, float]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, QUEUES_PER_BROKER)
        started: dict[str, float] = {}
        async with consumer(cluster, collect) as c, Producer(cluster.name_servers) as producer:
            await settled([c], ALL_QUEUES)
            for i in range(10):
                message = Message(TOPIC, f"later {i}".encode())
                message.delay_level = level
                before = time.monotonic()
                result = await producer.send(message)
                started[result.msg_id] = before

            async def arrived() -> bool:
                return set(arrivals) >= set(started)

            await eventually(arrived, 10, what="delayed messages")
        return started

    with retry_cluster(tmp_path) as cluster:
        started = asyncio.run(scenario(cluster))
    delay_s = TEST_DELAYS_MS[level - 1] / 1000
    for key, sent_at in started.items():
        arrived_at, message = arrivals[key]
        assert arrived_at - sent_at >= delay_s - TIMESTAMP_SLACK_S, (key, arrived_at - sent_at)
        assert arrived_at - sent_at < delay_s + 2.0
        assert message.topic == TOPIC
        assert message.reconsume_times == 0
        assert props.DELAY_TIME_LEVEL not in message.properties
        assert message.properties[props.REAL_TOPIC] == TOPIC
