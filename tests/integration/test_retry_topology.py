"""Lowering a group's retryQueueNums while retries are pending loses none of them (DESIGN §3,
"Retry topology changes"): real brokers, a real consumer that fails each message three times,
and the group lowered from 4 retry queues to 1 with retries waiting in the removed queues and
in the schedule."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import RequestCode

from .cluster import Cluster, create_topic, send_all, settled
from .retry_support import read_queue, retry_cluster, total
from .wire_client import BrokerClient, eventually

TOPIC = "shipments"
GROUP = "shipments-consumer"
RETRY = retry_topic(GROUP)
DELAY_LEVELS = "100ms 100ms 4s 300ms 300ms"
"""The second wave's first retry (level 3, the broker's choice) waits 4 s: the count is
lowered while all of them wait, however slow the machine is between their send-backs and the
lowering (with 1.5 s, a stall of 1.6 s there left none waiting). The listener asks level 1
(100 ms) for the first wave's first retry: it only has to reach the retry queues before the
lowering."""
FIRST_WAVE_LEVEL = 1
FAILURES = 3
WAVE = 40

Delivery = tuple[float, int, int]
"""(monotonic time, reconsume times, queue id it was pulled from)."""


@dataclass
class Lowering:
    keys: set[str]
    second: set[str]
    """The messages whose first retry waited in the schedule while the count was lowered."""
    lowered_at: float
    counts: list[tuple[int, int]]
    """(read, write) queues of the retry topic per broker right after lowering."""
    pending: float
    routed: tuple[int, int]
    offsets_before: dict[tuple[str, int], int]
    offsets_after: dict[tuple[str, int], int]
    queue_0: list[StoredMessage]
    dlq: list[StoredMessage]


async def retry_counts(admin: AdminClient, cluster: Cluster) -> list[tuple[int, int]]:
    """(read, write) queue counts of the retry topic on each broker."""
    counts = []
    for broker in cluster.brokers.values():
        config = (await admin.topic_configs(broker.address))[RETRY]
        counts.append((config.read_queue_nums, config.write_queue_nums))
    return counts


async def max_offsets(cluster: Cluster) -> dict[tuple[str, int], int]:
    async with BrokerClient() as client:
        return {
            (name, q): await client.queue_offset(
                broker.address, RequestCode.GET_MAX_OFFSET, RETRY, q
            )
            for name, broker in cluster.brokers.items()
            for q in range(4)
        }


def test_lowering_retry_queue_nums_under_load_loses_no_retry(tmp_path: Path) -> None:
    deliveries: dict[str, list[Delivery]] = defaultdict(list)
    succeeded: set[str] = set()
    release = asyncio.Event()

    async def fail_three_times(
        messages: list[StoredMessage], context: ConcurrentContext
    ) -> ConsumeStatus:
        [m] = messages
        assert m.uniq_key is not None
        deliveries[m.uniq_key].append((time.monotonic(), m.reconsume_times, m.queue_id))
        if m.reconsume_times == 0 and m.body == b"first":
            context.delay_level_when_next_consume = FIRST_WAVE_LEVEL
        if m.reconsume_times > 0:
            await release.wait()  # retries stay unconsumed until the count is lowered
        if m.reconsume_times < FAILURES:
            return ConsumeStatus.RECONSUME_LATER
        succeeded.add(m.uniq_key)
        return ConsumeStatus.CONSUME_SUCCESS

    async def scenario(cluster: Cluster) -> Lowering:
        brokers = list(cluster.brokers.values())
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_group(SubscriptionGroupConfig(GROUP, retry_queue_nums=4))
            await create_topic(admin, TOPIC, 2)
            settings = ConsumerSettings(
                instance_name="lowering",
                concurrency=64,
                pull_batch_size=1,
                max_held_per_queue=2,  # most retries stay in their queues until pulled
                persist_interval_s=0.2,
            )
            c = PushConsumer(cluster.name_servers, GROUP, settings=settings)
            c.subscribe(TOPIC)
            c.register_listener(fail_three_times)
            async with c, Producer(cluster.name_servers) as producer:
                await settled([c], 2 * 2 + 2 * 4)  # the retry topic has 4 queues per broker
                first = await send_all(producer, (Message(TOPIC, b"first") for _ in range(WAVE)))

                async def first_wave_in_retry_queues() -> bool:
                    delivered = await total(
                        brokers, "reconsume_schedule_delivered_total", level=str(FIRST_WAVE_LEVEL)
                    )
                    return delivered == WAVE

                await eventually(first_wave_in_retry_queues, 20, what="first retries stored")
                second = await send_all(producer, (Message(TOPIC, b"second") for _ in range(WAVE)))
                await eventually(
                    lambda: _true(c.stats.sent_back == 2 * WAVE), what="second wave sent back"
                )

                await admin.create_group(SubscriptionGroupConfig(GROUP, retry_queue_nums=1))
                lowered_at = time.monotonic()
                at_lowering = await retry_counts(admin, cluster)
                pending = await total(brokers, "reconsume_schedule_pending", level="3")
                offsets_at_lowering = await max_offsets(cluster)
                route = await admin.route(RETRY)
                routed_at_lowering = (
                    (0, 0) if route is None else (len(route.read_queues), len(route.write_queues))
                )
                release.set()

                async def all_succeeded() -> bool:
                    return len(succeeded) == 2 * WAVE

                await eventually(all_succeeded, 30, what="every message consumed successfully")

                async def drained() -> bool:
                    return await retry_counts(admin, cluster) == [(1, 1), (1, 1)]

                await eventually(drained, 20, what="read queues lowered once drained")
            queue_0: list[StoredMessage] = []
            dlq: list[StoredMessage] = []
            async with BrokerClient() as client:
                for broker in brokers:
                    queue_0 += await read_queue(client, broker.address, RETRY, 0)
                    dlq += await read_queue(client, broker.address, dead_letter_topic(GROUP))
            return Lowering(
                keys={r.msg_id for r in first + second},
                second={r.msg_id for r in second},
                lowered_at=lowered_at,
                counts=at_lowering,
                pending=pending,
                routed=routed_at_lowering,
                offsets_before=offsets_at_lowering,
                offsets_after=await max_offsets(cluster),
                queue_0=queue_0,
                dlq=dlq,
            )

    with retry_cluster(tmp_path, delay_levels=DELAY_LEVELS) as cluster:
        r = asyncio.run(scenario(cluster))

    # Write queues dropped at once; read queues stayed while retries waited in them.
    assert r.counts == [(4, 1), (4, 1)]
    assert r.routed == (8, 2)
    assert r.pending > 0  # and some retries were still in the schedule
    # No retry lost: every message failed three times, then succeeded, and none is dead.
    assert succeeded == r.keys
    assert {k: [t for _, t, _ in d] for k, d in deliveries.items()} == {
        k: list(range(FAILURES + 1)) for k in r.keys
    }
    assert r.dlq == []
    # Queues 1-3 were read after the count was lowered (readable, no longer writable) ...
    assert any(
        at > r.lowered_at and times == 1 and queue_id > 0
        for d in deliveries.values()
        for at, times, queue_id in d
    )
    # ... and nothing was written to them any more: later retries all went to queue 0,
    # including those the schedule held for a removed queue.
    assert {k: v for k, v in r.offsets_after.items() if k[1] > 0} == {
        k: v for k, v in r.offsets_before.items() if k[1] > 0
    }
    for key in r.second:
        assert [q for _, times, q in deliveries[key] if times > 0] == [0] * FAILURES, key
    redirected = [m for m in r.queue_0 if m.properties.get(props.REAL_QUEUE_ID, "0") != "0"]
    assert redirected, "no scheduled retry for a removed queue was redirected to queue 0"


async def _true(value: bool) -> bool:
    return value
