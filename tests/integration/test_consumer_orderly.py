"""Orderly consumption, the admin client and the synchronous facade against real processes."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

from reconsume.client.admin import AdminClient
from reconsume.client.listener import (
    ConcurrentContext,
    ConsumeStatus,
    OrderlyContext,
    OrderlyStatus,
)
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.routes import MessageQueue
from reconsume.client.settings import ConsumerSettings
from reconsume.client.sync import SyncAdminClient, SyncProducer, SyncPushConsumer
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import retry_topic

from .cluster import Cluster, create_topic, settled
from .wire_client import BrokerClient, eventually

TOPIC = "ledger"
GROUP = "ledger-consumer"


async def _true(value: bool) -> bool:
    return value


def test_orderly_consumers_keep_each_queue_in_order_through_failures(cluster: Cluster) -> None:
    seen: dict[tuple[str, int], list[int]] = defaultdict(list)
    attempts: dict[int, list[int]] = defaultdict(list)

    async def listener(messages: list[StoredMessage], context: OrderlyContext) -> OrderlyStatus:
        for message in messages:
            seq = int(message.body)
            attempts[seq].append(message.reconsume_times)
            # Every 50th message fails twice before it succeeds.
            if seq % 50 == 7 and len(attempts[seq]) < 3:
                context.suspend_current_queue_time_ms = 20
                return OrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            seen[(message.properties["SHARD"], message.queue_id)].append(seq)
        return OrderlyStatus.SUCCESS

    async def scenario() -> list[tuple[str, str, int]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 2)
        consumers = []
        for name in ("o1", "o2"):
            settings = ConsumerSettings(instance_name=name)
            c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
            c.subscribe(TOPIC)
            c.register_orderly_listener(listener)
            await c.start()
            consumers.append(c)
        try:
            await settled(consumers, 6)
            queues = sorted(consumers[0].assigned | consumers[1].assigned)
            shards = [q for q in queues if q.topic == TOPIC]
            async with Producer(cluster.name_servers) as producer:
                for seq in range(400):
                    queue = shards[seq % len(shards)]
                    message = Message(TOPIC, str(seq).encode(), {"SHARD": queue.broker_name})
                    await producer.send(message, queue=queue)
            await eventually(
                lambda: _true(sum(len(v) for v in seen.values()) >= 400), 30, what="400"
            )
            # Another client of the group cannot take the queues the consumers hold locked.
            async with BrokerClient() as intruder:
                stolen = []
                for name, broker in cluster.brokers.items():
                    mine = [(q.topic, q.broker_name, q.queue_id) for q in shards]
                    mine = [q for q in mine if q[1] == name]
                    stolen += await intruder.lock(broker.address, GROUP, "intruder@1", mine)
        finally:
            for c in consumers:
                await c.shutdown()
        return stolen

    stolen = asyncio.run(scenario())
    assert stolen == []
    assert sum(len(v) for v in seen.values()) == 400
    for sequence in seen.values():
        assert sequence == sorted(sequence)
        assert len(sequence) == len(set(sequence)) == 100
    for seq, times in attempts.items():
        assert times == ([0, 1, 2] if seq % 50 == 7 else [0]), (seq, times)


def test_admin_client_manages_topics_groups_and_offsets(cluster: Cluster) -> None:
    async def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario() -> None:
        async with AdminClient(cluster.name_servers) as admin:
            assert [b.name for b in await admin.brokers()] == ["broker-a", "broker-b"]
            assert [b.name for b in await admin.brokers("test")] == ["broker-a", "broker-b"]
            assert await admin.brokers("elsewhere") == []
            await create_topic(admin, TOPIC, 3)
            assert TOPIC in await admin.topics()
            for broker in cluster.brokers.values():
                config = (await admin.topic_configs(broker.address))[TOPIC]
                assert (config.read_queue_nums, config.write_queue_nums) == (3, 3)

            group = SubscriptionGroupConfig(GROUP, retry_queue_nums=2, retry_max_times=5)
            await admin.create_group(group)
            for broker in cluster.brokers.values():
                stored = (await admin.group_configs(broker.address))[GROUP]
                assert (stored.retry_queue_nums, stored.retry_max_times) == (2, 5)

            async with Producer(cluster.name_servers) as producer:
                for i in range(60):
                    await producer.send(Message(TOPIC, f"a{i}".encode()))
            assert await admin.topic_depth(TOPIC) == 60
            progress = await admin.consumer_progress(GROUP, TOPIC)
            assert len(progress) == 6
            assert sum(p.depth for p in progress) == 60
            # Nothing consumed yet: every stored message is still ahead of the group.
            assert sum(p.lag for p in progress) == 60

            settings = ConsumerSettings(instance_name="adm")
            c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
            c.subscribe(TOPIC)
            c.register_listener(listener)
            async with c:
                # Six topic queues and the retry topic's two queues on each broker.
                await settled([c], 10)
                assert await admin.consumer_ids(GROUP) == [c.client_id]

                async def drained() -> bool:
                    rows = await admin.consumer_progress(GROUP, TOPIC)
                    return sum(p.lag for p in rows) == 0

                # A new group starts at the first message while it is still in memory.
                await eventually(drained, what="group caught up")
            assert await admin.consumer_ids(GROUP) == []

            queue = MessageQueue(TOPIC, "broker-a", 0)
            await admin.update_consumer_offset(GROUP, queue, 3)
            assert await admin.consumer_offset(GROUP, queue) == 3

            await admin.delete_group(GROUP)
            for broker in cluster.brokers.values():
                assert GROUP not in await admin.group_configs(broker.address)
            await admin.delete_topic(TOPIC)
            assert await admin.route(TOPIC) is None
            assert TOPIC not in await admin.topics()

    asyncio.run(scenario())


def test_synchronous_facade_and_shutdown_commits_offsets(cluster: Cluster) -> None:
    received: list[str] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        with lock:
            received.extend(m.body.decode() for m in messages)
            threads.add(threading.current_thread().name)
        return ConsumeStatus.CONSUME_SUCCESS

    with SyncAdminClient(cluster.name_servers) as admin:
        admin.create_topic(TOPIC, queues=2)
        # Offsets are committed only at shutdown here (the periodic commit is an hour away).
        settings = ConsumerSettings(instance_name="sync", persist_interval_s=3600)
        consumer = SyncPushConsumer(cluster.name_servers, GROUP, settings=settings)
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        with SyncProducer(cluster.name_servers) as producer:
            producer.send(Message(TOPIC, b"first"))  # routes reach the name server first
            consumer.start()
            results = [producer.send(Message(TOPIC, f"s{i}".encode())) for i in range(100)]
        assert {r.queue.broker_name for r in results} == {"broker-a", "broker-b"}
        asyncio.run(eventually(lambda: _true(len(received) >= 101), what="101 messages"))
        consumer.shutdown()
        progress = admin.consumer_progress(GROUP, TOPIC)
        assert sum(p.lag for p in progress) == 0, progress
        assert admin.consumer_ids(GROUP) == []
        assert retry_topic(GROUP) in admin.topics()
    assert sorted(received) == sorted(["first", *(f"s{i}" for i in range(100))])
    assert all(name.startswith("consume-") for name in threads)
