"""The push consumer against one real name server and two real Sync-flush brokers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient, QueueProgress
from reconsume.client.listener import ConcurrentContext, ConsumeStatus, MessageModel
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import DEFAULT_SETTINGS, ConsumerSettings
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import retry_topic

from .cluster import Cluster, Collector, create_topic, send_all, settled
from .retry_support import retry_cluster, total
from .wire_client import eventually

TOPIC = "orders"
GROUP = "orders-consumer"


def consumer(
    cluster: Cluster, name: str, listener: Collector, settings: ConsumerSettings = DEFAULT_SETTINGS
) -> PushConsumer:
    settings = replace(settings, instance_name=name)
    c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
    c.subscribe(TOPIC)
    c.register_listener(listener)
    return c


def test_two_consumers_receive_every_message_exactly_once(cluster: Cluster) -> None:
    async def scenario() -> tuple[Collector, Collector, list[str]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 4)
            first, second = Collector(), Collector()
            async with (
                consumer(cluster, "c1", first) as c1,
                consumer(cluster, "c2", second) as c2,
            ):
                # 8 queues of the topic and the retry topic's queue on each broker.
                await settled([c1, c2], 10)
                async with Producer(cluster.name_servers) as producer:
                    sent = await send_all(
                        producer, (Message(TOPIC, f"order {i}".encode()) for i in range(10_000))
                    )

                async def all_received() -> bool:
                    return len(first.received) + len(second.received) >= 10_000

                await eventually(all_received, 60, what="10,000 deliveries")
                # Anything extra would show up while the consumers keep running.
                await asyncio.sleep(0.5)
                assert {q.broker_name for q in c1.assigned | c2.assigned} == {
                    "broker-a",
                    "broker-b",
                }
            progress = await admin.consumer_progress(GROUP, TOPIC)
            assert sum(p.lag for p in progress) == 0, progress
        return first, second, [r.msg_id for r in sent]

    first, second, sent = asyncio.run(scenario())
    both = first.counts() + second.counts()
    assert set(both) == set(sent)
    assert max(both.values()) == 1
    assert len(first.received) > 2_000
    assert len(second.received) > 2_000


@pytest.mark.usefixtures("frozen_gc")
def test_a_waiting_consumer_sees_a_new_message_within_50_ms(tmp_path: Path) -> None:
    arrivals: dict[str, float] = {}

    async def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        now = time.perf_counter()
        for message in messages:
            assert message.uniq_key is not None
            arrivals[message.uniq_key] = now
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario(cluster: Cluster) -> list[float]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 1)
        brokers = list(cluster.brokers.values())

        async def all_pulls_held() -> bool:
            # The topic's and the retry topic's queue on each broker: 4 pulls held.
            return await total(brokers, "reconsume_long_poll_suspended") == 4

        c = PushConsumer(
            cluster.name_servers, GROUP, settings=ConsumerSettings(instance_name="waiter")
        )
        c.subscribe(TOPIC)
        c.register_listener(listener)
        latencies = []
        async with c, Producer(cluster.name_servers) as producer:
            await settled([c], 4)
            await producer.send(Message(TOPIC, b"warm-up"))
            await eventually(lambda: _true(len(arrivals) == 1), what="warm-up")
            for i in range(20):
                await eventually(all_pulls_held, what="the consumer waiting on every queue")
                started = time.perf_counter()
                result = await producer.send(Message(TOPIC, f"m{i}".encode()))
                await eventually(lambda r=result: _true(r.msg_id in arrivals), what="arrival")  # type: ignore[misc]
                latencies.append(arrivals[result.msg_id] - started)
        return latencies

    # Async flush: under Sync flush a message is shown to consumers once it is durable, so
    # the wait would include the disk's fsync, which on a shared VM stalls for 100 ms and
    # more now and then (bench/RESULTS.md, "Waiting consumer").
    with retry_cluster(tmp_path, extra=("--flush", "Async")) as cluster:
        latencies = sorted(asyncio.run(scenario(cluster)))
    assert latencies[-1] < 0.050, latencies


async def _true(value: bool) -> bool:
    return value


def test_broadcasting_delivers_everything_to_each_consumer(
    cluster: Cluster, tmp_path: Path
) -> None:
    async def scenario() -> tuple[Collector, Collector, list[str]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 2)
        one, two = Collector(), Collector()
        consumers = [
            consumer(
                cluster,
                name,
                collector,
                ConsumerSettings(model=MessageModel.BROADCASTING, offset_dir=tmp_path / name),
            )
            for name, collector in (("b1", one), ("b2", two))
        ]
        async with consumers[0] as c1, consumers[1] as c2, Producer(cluster.name_servers) as p:
            await eventually(lambda: _true(len(c1.assigned) == 4 == len(c2.assigned)))
            sent = await send_all(p, (Message(TOPIC, f"b{i}".encode()) for i in range(500)))
            await eventually(lambda: _true(len(one.received) >= 500 <= len(two.received)))
            await asyncio.sleep(0.3)
        # Each consumer's progress is in its own file.
        assert (tmp_path / "b1" / GROUP / "offsets.json").exists()
        return one, two, [r.msg_id for r in sent]

    one, two, sent = asyncio.run(scenario())
    for collector in (one, two):
        assert sorted(collector.received) == sorted(sent)


def test_tag_filtering_delivers_only_matching_tags(cluster: Cluster) -> None:
    async def scenario() -> tuple[Collector, dict[str, str]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 2)
            tagged = Collector()
            # A held pull wakes only for matching messages; with a short long-poll the queues
            # holding nothing but other tags report their progress soon after their expiry.
            settings = ConsumerSettings(instance_name="tags", long_poll_ms=1000)
            c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
            c.subscribe(TOPIC, "TagA || TagC")
            c.register_listener(tagged)
            async with c, Producer(cluster.name_servers) as producer:
                await settled([c], 6)
                tags: dict[str, str] = {}
                for i in range(200):
                    tag = ["TagA", "TagB", "TagC", ""][i % 4]
                    message = Message(TOPIC, f"t{i}".encode())
                    if tag:
                        message.tags = tag
                    tags[(await producer.send(message)).msg_id] = tag
                wanted = sum(1 for t in tags.values() if t in ("TagA", "TagC"))
                await eventually(lambda: _true(len(tagged.received) >= wanted))

                # Offsets move past filtered messages too: nothing is left for the group.
                progress: list[QueueProgress] = []

                async def caught_up() -> bool:
                    progress[:] = await admin.consumer_progress(GROUP, TOPIC)
                    return sum(p.lag for p in progress) == 0

                try:
                    await eventually(caught_up, what="offsets past filtered messages")
                except AssertionError as exc:
                    raise AssertionError(progress) from exc
        return tagged, tags

    tagged, tags = asyncio.run(scenario())
    assert sorted(tagged.received) == sorted(k for k, t in tags.items() if t in ("TagA", "TagC"))
    assert {m.tags for m in tagged.messages} == {"TagA", "TagC"}


def test_retry_topic_is_subscribed_in_clustering(cluster: Cluster) -> None:
    async def scenario() -> frozenset[str]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 1)
        c = consumer(cluster, "retry-sub", Collector())
        async with c:
            await settled([c], 4)
            return frozenset(q.topic for q in c.assigned)

    assert asyncio.run(scenario()) == {TOPIC, retry_topic(GROUP)}
