"""Per-group retry policies (RocketMQ 5's ``groupRetryPolicy``) end to end: an always-failing
push consumer against two real brokers; every retry waits its policy's delay on the timer
wheel, then the message is dead-lettered once. Bad policies are refused naming the field."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.decode import decode_record
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import ResponseCode

from .cluster import Cluster, create_topic, send_all, settled
from .retry_support import TIMESTAMP_SLACK_S, read_queue, retry_cluster, total
from .wire_client import BrokerClient, eventually, ok

TOPIC = "invoices"
GROUP = "invoices-consumer"
MAX_TIMES = 4
COUNT = 10
SCHEDULING_BOUND_MS = 50
"""A retry's due time is its send-back's time + the delay: the timer record is stored within
this many milliseconds of the decision."""

POLICIES: dict[str, tuple[dict[str, Any], list[int]]] = {
    "customized": (
        {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [150, 300, 50]}},
        [150, 300, 50, 50],  # the last delay repeats
    ),
    "exponential": (
        {
            "type": "EXPONENTIAL",
            "exponentialRetryPolicy": {"initial": 100, "max": 500, "multiplier": 3},
        },
        [100, 300, 500, 500],
    ),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_delays_are_followed_per_attempt_then_dead_letter(tmp_path: Path, name: str) -> None:
    policy, delays_ms = POLICIES[name]
    deliveries: dict[str, list[tuple[float, StoredMessage]]] = defaultdict(list)

    async def always_fail(messages: list[StoredMessage], context: ConcurrentContext) -> None:
        now = time.monotonic()
        for m in messages:
            assert m.uniq_key is not None
            deliveries[m.uniq_key].append((now, m))
        return None  # RECONSUME_LATER

    async def scenario(cluster: Cluster) -> tuple[list[str], list[StoredMessage], dict[int, Any]]:
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_group(SubscriptionGroupConfig(GROUP, group_retry_policy=policy))
            for broker in cluster.brokers.values():  # kept as given, RocketMQ's shape
                stored = (await admin.group_configs(broker.address))[GROUP]
                assert stored.to_dict()["groupRetryPolicy"] == policy
            await create_topic(admin, TOPIC, 2)
            settings = ConsumerSettings(instance_name="policy-test", max_reconsume_times=MAX_TIMES)
            consumer = PushConsumer(cluster.name_servers, GROUP, settings=settings)
            consumer.subscribe(TOPIC)
            consumer.register_listener(always_fail)
            async with consumer, Producer(cluster.name_servers) as producer:
                await settled([consumer], 2 * 2 + 2)
                sent = await send_all(
                    producer, (Message(TOPIC, f"i{i}".encode()) for i in range(COUNT))
                )

                async def all_dead() -> list[StoredMessage] | None:
                    found = await dead_letters(cluster)
                    return found if len(found) >= COUNT else None

                dlq: list[StoredMessage] = await eventually(all_dead, 60, what="dead letters")
            brokers = list(cluster.brokers.values())
            retries = COUNT * MAX_TIMES
            assert await total(brokers, "reconsume_timer_delivered_total") == retries
            assert await total(brokers, "reconsume_schedule_delivered_total", level="3") == 0
            origins = await timer_records(cluster, deliveries)
            return [r.msg_id for r in sent], dlq, origins

    with retry_cluster(tmp_path) as cluster:
        keys, dlq, origins = asyncio.run(scenario(cluster))

    assert {k: len(v) for k, v in deliveries.items()} == {k: 1 + MAX_TIMES for k in keys}
    for key, seen in deliveries.items():
        assert [m.reconsume_times for _, m in seen] == list(range(1 + MAX_TIMES)), key
        for attempt, ((before, _), (after, retry)) in enumerate(itertools.pairwise(seen)):
            delay_ms = delays_ms[attempt]
            assert retry.topic == TOPIC  # restored from RETRY_TOPIC for the listener
            assert retry.properties[props.REAL_TOPIC] == retry_topic(GROUP)
            assert after - before >= delay_ms / 1000 - TIMESTAMP_SLACK_S, (key, attempt)
            # The retry's due time is its policy's delay after the send-back stored it.
            due = int(retry.properties[props.TIMER_OUT_MS])
            stored = origins[int(retry.properties[props.SCHEDULE_ORIGIN])]
            assert delay_ms - SCHEDULING_BOUND_MS <= due - stored <= delay_ms, (key, attempt)
    assert Counter(m.uniq_key for m in dlq) == Counter(keys)  # each exactly once
    for m in dlq:
        assert m.reconsume_times == MAX_TIMES + 1
        assert m.properties[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == TOPIC


async def dead_letters(cluster: Cluster) -> list[StoredMessage]:
    async with BrokerClient() as client:
        found: list[StoredMessage] = []
        for broker in cluster.brokers.values():
            found += await read_queue(client, broker.address, dead_letter_topic(GROUP))
        return found


async def timer_records(
    cluster: Cluster, deliveries: dict[str, list[tuple[float, StoredMessage]]]
) -> dict[int, int]:
    """Store time of the timer record each retry came from, by its commit-log offset."""
    found: dict[int, int] = {}
    addresses = {b.address for b in cluster.brokers.values()}
    async with BrokerClient() as client:
        for seen in deliveries.values():
            for _, retry in seen[1:]:
                offset = int(retry.properties[props.SCHEDULE_ORIGIN])
                addr = str(retry.store_host)
                assert addr in addresses
                record = decode_record(ok(await client.view(addr, offset)).body)
                found[offset] = record.store_timestamp_ms
    return found


BAD_POLICIES = [
    ({"type": "LINEAR"}, "groupRetryPolicy.type"),
    ({"customizedRetryPolicy": {"next": []}}, "groupRetryPolicy.customizedRetryPolicy.next"),
    (
        {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "multiplier": -2}},
        "groupRetryPolicy.exponentialRetryPolicy.multiplier",
    ),
]


def test_a_bad_policy_is_refused_naming_the_field(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster) -> None:
        addr = cluster.brokers["broker-a"].address
        async with BrokerClient() as client:
            for policy, field in BAD_POLICIES:
                response = await client.create_group(
                    addr, {"groupName": "bad-policy", "groupRetryPolicy": policy}
                )
                assert response.code == ResponseCode.SYSTEM_ERROR
                assert field in (response.remark or ""), response.remark
            assert "bad-policy" not in (await client.groups(addr))["subscriptionGroupTable"]

    with retry_cluster(tmp_path, ("broker-a",)) as cluster:
        asyncio.run(scenario(cluster))
