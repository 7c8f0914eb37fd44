"""Filling a group's dead-letter queue through the real retry path: a push consumer that
fails every message with a maximum of 0 reconsume times, so the broker stores each one in
``%DLQ%<group>`` on its first send-back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_job_group, dead_letter_topic

from ..integration.cluster import Cluster, create_topic, send_all
from ..integration.wire_client import eventually


async def fail_into_the_dlq(
    cluster: Cluster,
    topic: str,
    group: str,
    messages: Sequence[Message],
    *,
    queues: int = 1,
    create_group: bool = True,
) -> list[SendResult]:
    """Send ``messages`` to ``topic`` and fail each once as ``group`` (created with defaults
    unless ``create_group`` is false: a group someone else manages); returns the sends once
    every message is a dead letter."""
    async with AdminClient(cluster.name_servers) as admin:
        if create_group:
            await admin.create_group(SubscriptionGroupConfig(group))
        await create_topic(admin, topic, queues)
        before = await admin.topic_depth(dead_letter_topic(group))
        async with Producer(cluster.name_servers) as producer:
            sent = await send_all(producer, list(messages))

        async def fail(batch: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
            return ConsumeStatus.RECONSUME_LATER

        settings = ConsumerSettings(instance_name=group, max_reconsume_times=0)
        consumer = PushConsumer(cluster.name_servers, group, settings=settings)
        consumer.subscribe(topic)
        consumer.register_listener(fail)
        await consumer.start()
        try:

            async def all_dead() -> bool:
                depth = await admin.topic_depth(dead_letter_topic(group))
                return depth - before == len(sent)

            await eventually(all_dead, 120, what="every message dead-lettered")
        finally:
            await consumer.shutdown()
    return sent


async def backlog_async(cluster: Cluster, group: str) -> int:
    """Dead letters of ``group`` no job has handled, over every broker."""
    async with AdminClient(cluster.name_servers) as admin:
        topic = dead_letter_topic(group)
        route = await admin.route(topic)
        if route is None:
            return 0
        total = 0
        for broker in sorted({q.broker_name for q in route.read_queues}):
            address = route.master_of(broker)
            assert address is not None
            queues = sum(1 for q in route.read_queues if q.broker_name == broker)
            total += await admin.broker_depth(
                address, topic, queues, group=dead_letter_job_group(group)
            )
        return total


def dead_letter_backlog(cluster: Cluster, group: str) -> int:
    return asyncio.run(backlog_async(cluster, group))
