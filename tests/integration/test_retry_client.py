"""The push consumer's side of retries, against real name server and broker processes with
millisecond delay levels: the fallback send when a broker refuses or cannot take a send-back,
the local retry when that fails too, broadcasting never retrying, orderly queues giving a
message up at the maximum, and the consumer's own maximum overriding the group's."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.client.listener import (
    ConcurrentContext,
    ConcurrentListener,
    ConsumeStatus,
    MessageModel,
    OrderlyContext,
    OrderlyStatus,
)
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.client.settings import DEFAULT_SETTINGS, ConsumerSettings
from reconsume.client.stats import ConsumerStats
from reconsume.message import properties as props
from reconsume.message.configs import PERM_READ, SubscriptionGroupConfig
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic

from .cluster import Cluster, create_topic, send_all, settled
from .retry_support import TEST_DELAYS_MS, TIMESTAMP_SLACK_S, read_queue, retry_cluster, total
from .wire_client import BrokerClient, eventually

TOPIC = "invoices"
COUNT = 10
FIRST_RETRY_DELAY_S = TEST_DELAYS_MS[3 - 1] / 1000
"""A first retry waits at level 3 (3 + reconsumeTimes 0)."""

Delivery = tuple[float, int, str, int]
"""(monotonic time, reconsume times, topic the listener saw, queue offset)."""


@dataclass
class FallbackRun:
    sent: list[SendResult]
    stats: tuple[ConsumerStats, ConsumerStats]
    broker_b: str
    retries: list[StoredMessage]
    dlq: list[StoredMessage]
    send_backs: list[float]
    level_3: float


async def _true(value: bool) -> bool:
    return value


async def stored_in(cluster: Cluster, topic: str) -> list[StoredMessage]:
    """Everything ``topic``'s queue 0 holds on every broker."""
    async with BrokerClient() as client:
        found: list[StoredMessage] = []
        for broker in cluster.brokers.values():
            found += await read_queue(client, broker.address, topic)
        return found


async def routed(admin: AdminClient, topic: str, read: int, write: int) -> None:
    async def probe() -> bool:
        route = await admin.route(topic)
        return (
            route is not None
            and len(route.read_queues) == read
            and len(route.write_queues) == write
        )

    await eventually(probe, what=f"route of {topic} with {read} read, {write} write queues")


async def send(cluster: Cluster, count: int = COUNT) -> list[SendResult]:
    async with Producer(cluster.name_servers) as producer:
        return await send_all(producer, (Message(TOPIC, f"i{i}".encode()) for i in range(count)))


def recorder(
    deliveries: dict[str, list[Delivery]], succeed_from: int
) -> tuple[ConcurrentListener, asyncio.Event]:
    """A listener recording each delivery; it fails while reconsume times < ``succeed_from``,
    and holds first deliveries until the returned event is set."""
    release = asyncio.Event()
    release.set()

    async def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        for m in messages:
            assert m.uniq_key is not None
            deliveries[m.uniq_key].append(
                (time.monotonic(), m.reconsume_times, m.topic, m.queue_offset)
            )
        if messages[0].reconsume_times == 0:
            await release.wait()
        if messages[0].reconsume_times < succeed_from:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    return listener, release


def consumer(
    cluster: Cluster,
    group: str,
    listener: ConcurrentListener,
    settings: ConsumerSettings = DEFAULT_SETTINGS,
) -> PushConsumer:
    settings = replace(
        settings,
        instance_name=group,
        persist_interval_s=0.2,  # offsets reach the broker soon: lag is checked
    )
    c = PushConsumer(cluster.name_servers, group, settings=settings)
    c.subscribe(TOPIC)
    c.register_listener(listener)
    return c


async def lag(admin: AdminClient, group: str) -> int:
    return sum(p.lag for p in await admin.consumer_progress(group, TOPIC))


def test_a_refused_send_back_is_sent_to_the_retry_topic_instead(tmp_path: Path) -> None:
    """Broker-a holds the topic but refuses send-backs (its retry topics are read-only): the
    consumer sends each retry to %RETRY%<group> on broker-b as a normal, delayed message, whose
    reconsume times and maximum travel in the send's header."""
    again, dead = "fallback-again", "fallback-dead"
    deliveries: dict[str, list[Delivery]] = defaultdict(list)
    dead_deliveries: dict[str, list[Delivery]] = defaultdict(list)

    async def scenario(cluster: Cluster) -> FallbackRun:
        a, b = (cluster.brokers[n].address for n in ("broker-a", "broker-b"))
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_topic(TOPIC, queues=2, brokers=[a])
            for group in (again, dead):
                await admin.create_topic(retry_topic(group), queues=1, perm=PERM_READ, brokers=[a])
                await admin.create_topic(retry_topic(group), queues=1, brokers=[b])
                await routed(admin, retry_topic(group), read=2, write=1)
            await routed(admin, TOPIC, read=2, write=2)
            once, _ = recorder(deliveries, succeed_from=1)
            never, _ = recorder(dead_deliveries, succeed_from=99)
            c1 = consumer(cluster, again, once)
            c2 = consumer(cluster, dead, never, ConsumerSettings(max_reconsume_times=1))
            async with c1, c2:
                await settled([c1], 4)
                await settled([c2], 4)
                sent = await send(cluster)

                async def done() -> bool:
                    twice = len(deliveries) == COUNT and all(
                        len(d) >= 2 for d in deliveries.values()
                    )
                    return twice and len(await stored_in(cluster, dead_letter_topic(dead))) >= COUNT

                await eventually(done, 20, what="retries redelivered and dead-lettered")
                # The dead-lettered messages were never consumed, yet the offset moved on.
                await eventually(lambda: _true(c1.stats.consumed == COUNT))
                for group in (again, dead):

                    async def caught_up(group: str = group) -> bool:
                        return await lag(admin, group) == 0

                    await eventually(caught_up, what=f"{group} offsets past sent-back messages")
                stats = (c1.stats, c2.stats)
            brokers = list(cluster.brokers.values())
            return FallbackRun(
                sent=sent,
                stats=stats,
                broker_b=b,
                retries=await stored_in(cluster, retry_topic(again)),
                dlq=await stored_in(cluster, dead_letter_topic(dead)),
                send_backs=[
                    await total(brokers, "reconsume_send_back_total", group=g, origin_topic=TOPIC)
                    for g in (again, dead)
                ],
                level_3=await total(
                    [cluster.brokers["broker-b"]], "reconsume_schedule_delivered_total", level="3"
                ),
            )

    with retry_cluster(tmp_path) as cluster:
        r = asyncio.run(scenario(cluster))

    keys = {s.msg_id for s in r.sent}
    assert set(deliveries) == keys == set(dead_deliveries)
    for key, seen in deliveries.items():
        assert [(times, topic) for _, times, topic, _ in seen] == [(0, TOPIC), (1, TOPIC)], key
        assert seen[1][0] - seen[0][0] >= FIRST_RETRY_DELAY_S - TIMESTAMP_SLACK_S
    # The consumer's maximum (1) reached the broker in the header: a dead letter at once.
    assert {k: len(v) for k, v in dead_deliveries.items()} == dict.fromkeys(keys, 1)

    assert sorted(m.uniq_key or "" for m in r.retries) == sorted(keys)
    for m in r.retries:
        assert str(m.store_host) == r.broker_b
        assert m.reconsume_times == 1
        assert m.properties[props.RETRY_TOPIC] == TOPIC
        assert m.properties[props.ORIGIN_MESSAGE_ID] == m.uniq_key
        assert m.properties[props.REAL_TOPIC] == retry_topic(again)
        assert props.RECONSUME_TIME not in m.properties  # moved into the send's header
        assert props.MAX_RECONSUME_TIMES not in m.properties
    assert r.level_3 == COUNT  # delayed at level 3 + reconsumeTimes

    assert Counter(m.uniq_key for m in r.dlq) == Counter(keys)
    for m in r.dlq:
        assert str(m.store_host) == r.broker_b
        assert m.reconsume_times == 1
        assert m.properties[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == TOPIC
        assert m.properties[props.DLQ_ORIGIN_MESSAGE_ID] == m.uniq_key
    assert r.send_backs == [0, 0]  # nothing went through CONSUMER_SEND_MSG_BACK
    again_stats, dead_stats = r.stats
    assert (again_stats.retry_sends, again_stats.sent_back, again_stats.local_retries) == (
        COUNT,
        0,
        0,
    )
    assert (dead_stats.retry_sends, dead_stats.consumed, dead_stats.failed) == (COUNT, 0, COUNT)


def test_a_broker_gone_while_consuming_gets_its_retries_sent_elsewhere(tmp_path: Path) -> None:
    """Broker-a is SIGKILLed while its messages are in the listener: their send-back cannot
    reach it, so the retries go to %RETRY%<group> on broker-b and are consumed from there."""
    group = "gone-consumer"
    deliveries: dict[str, list[Delivery]] = defaultdict(list)

    async def scenario(cluster: Cluster) -> list[SendResult]:
        a, b = (cluster.brokers[n].address for n in ("broker-a", "broker-b"))
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_topic(TOPIC, queues=2, brokers=[a])
            await admin.create_topic(retry_topic(group), queues=1, brokers=[a, b])
            await routed(admin, retry_topic(group), read=2, write=2)
            await routed(admin, TOPIC, read=2, write=2)
        listener, release = recorder(deliveries, succeed_from=1)
        release.clear()
        async with consumer(cluster, group, listener) as c:
            await settled([c], 4)
            sent = await send(cluster)
            await eventually(lambda: _true(len(deliveries) == COUNT), what="all in the listener")
            cluster.brokers["broker-a"].kill()
            release.set()

            async def redelivered() -> bool:
                return all(len(d) >= 2 for d in deliveries.values())

            await eventually(redelivered, 20, what="retries consumed from broker-b")
            assert c.stats.retry_sends == COUNT
            assert c.stats.local_retries == 0
        return sent

    with retry_cluster(tmp_path) as cluster:
        sent = asyncio.run(scenario(cluster))
    assert set(deliveries) == {s.msg_id for s in sent}
    for key, seen in deliveries.items():
        assert [(times, topic) for _, times, topic, _ in seen] == [(0, TOPIC), (1, TOPIC)], key


def test_a_retry_nobody_can_store_is_consumed_again_locally(tmp_path: Path) -> None:
    """Both brokers refuse the send-back and the fallback send (read-only retry topics): the
    consumer consumes the messages again itself after local_retry_delay_s, with reconsume
    times + 1, and commits past them only once that succeeded."""
    group = "local-consumer"
    delay_s = 0.5
    deliveries: dict[str, list[Delivery]] = defaultdict(list)

    async def scenario(cluster: Cluster) -> tuple[list[SendResult], list[StoredMessage]]:
        a = cluster.brokers["broker-a"].address
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_topic(TOPIC, queues=2, brokers=[a])
            await admin.create_topic(retry_topic(group), queues=1, perm=PERM_READ)
            await routed(admin, retry_topic(group), read=2, write=0)
            await routed(admin, TOPIC, read=2, write=2)
            listener, _ = recorder(deliveries, succeed_from=1)
            settings = ConsumerSettings(local_retry_delay_s=delay_s)
            async with consumer(cluster, group, listener, settings) as c:
                await settled([c], 4)
                sent = await send(cluster)
                await eventually(lambda: _true(c.stats.consumed == COUNT), 10, what="consumed")

                async def caught_up() -> bool:
                    return await lag(admin, group) == 0

                await eventually(caught_up, what="offsets committed after the local retries")
                stats = c.stats
            assert (stats.local_retries, stats.sent_back, stats.retry_sends) == (COUNT, 0, 0)
            return sent, await stored_in(cluster, retry_topic(group))

    with retry_cluster(tmp_path) as cluster:
        sent, retries = asyncio.run(scenario(cluster))
    assert retries == []
    assert set(deliveries) == {s.msg_id for s in sent}
    for key, seen in deliveries.items():
        (first, r0, t0, offset0), (second, r1, t1, offset1) = seen
        assert (r0, r1, t0, t1) == (0, 1, TOPIC, TOPIC), key
        assert offset0 == offset1  # the same message, from its own queue
        assert second - first >= delay_s


def test_broadcasting_failures_are_dropped_and_counted(tmp_path: Path) -> None:
    group = "broadcast-consumer"
    delivered: Counter[str] = Counter()

    def fail(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        delivered.update(m.uniq_key or "" for m in messages)
        if int(messages[0].body[1:]) % 2:
            raise RuntimeError("listener failure")  # counts as RECONSUME_LATER
        return ConsumeStatus.RECONSUME_LATER

    async def scenario(cluster: Cluster) -> tuple[list[SendResult], dict[str, int], int]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 2)
        settings = ConsumerSettings(
            model=MessageModel.BROADCASTING,
            offset_dir=tmp_path / "offsets",
            local_retry_delay_s=0.05,  # a local retry, were there one, would come at once
        )
        c = PushConsumer(cluster.name_servers, group, settings=settings)
        c.subscribe(TOPIC)
        c.register_listener(fail)
        async with c:
            await eventually(lambda: _true(len(c.assigned) == 4), what="every queue read")
            sent = await send(cluster, 2 * COUNT)
            await eventually(lambda: _true(c.failures_dropped == 2 * COUNT), what="dropped")
            stats = c.stats
        assert (stats.dropped, stats.failed, stats.consumed) == (2 * COUNT, 2 * COUNT, 0)
        assert (stats.sent_back, stats.retry_sends, stats.local_retries) == (0, 0, 0)
        brokers = list(cluster.brokers.values())
        send_backs = await total(
            brokers, "reconsume_send_back_total", group=group, origin_topic=TOPIC
        )
        assert await stored_in(cluster, retry_topic(group)) == []
        document = json.loads((tmp_path / "offsets" / group / "offsets.json").read_text())
        committed = sum(entry["offset"] for entry in document["offsets"])
        return sent, dict(delivered), int(send_backs) + committed

    with retry_cluster(tmp_path) as cluster:
        sent, seen, send_backs_and_committed = asyncio.run(scenario(cluster))
    assert seen == {s.msg_id: 1 for s in sent}  # never delivered again
    assert send_backs_and_committed == 2 * COUNT  # no send-back; offsets past every failure


def test_orderly_gives_a_message_up_at_the_maximum_and_the_queue_moves_on(tmp_path: Path) -> None:
    """A poison message in each queue: suspended and retried with growing reconsume times, at
    the consumer's maximum (3, below the group's 16) dead-lettered once; the messages behind
    it follow in order."""
    group = "orderly-consumer"
    per_queue, poison_at, max_times, suspend_ms = 20, 7, 3, 100
    attempts: dict[int, list[tuple[float, int]]] = defaultdict(list)
    consumed: dict[int, list[tuple[float, int]]] = defaultdict(list)

    async def listener(messages: list[StoredMessage], context: OrderlyContext) -> OrderlyStatus:
        for m in messages:
            shard, seq = (int(x) for x in m.body.split(b"/"))
            if seq == poison_at:
                attempts[shard].append((time.monotonic(), m.reconsume_times))
                return OrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            consumed[shard].append((time.monotonic(), seq))
        return OrderlyStatus.SUCCESS

    async def scenario(
        cluster: Cluster,
    ) -> tuple[dict[int, str], list[StoredMessage], ConsumerStats]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 1)
        settings = ConsumerSettings(
            instance_name="orderly", max_reconsume_times=max_times, suspend_ms=suspend_ms
        )
        c = PushConsumer(cluster.name_servers, group, settings=settings)
        c.subscribe(TOPIC)
        c.register_orderly_listener(listener)
        poison: dict[int, str] = {}
        async with c, Producer(cluster.name_servers) as producer:
            await settled([c], 4)
            shards = sorted(q for q in c.assigned if q.topic == TOPIC)
            for seq in range(per_queue):
                for shard, queue in enumerate(shards):
                    result = await producer.send(
                        Message(TOPIC, f"{shard}/{seq}".encode()), queue=queue
                    )
                    if seq == poison_at:
                        poison[shard] = result.msg_id

            async def done() -> bool:
                complete = all(len(consumed[s]) == per_queue - 1 for s in range(len(shards)))
                dlq = await stored_in(cluster, dead_letter_topic(group))
                return complete and len(dlq) >= len(shards)

            await eventually(done, 30, what="queues past their poison messages")
            stats = c.stats
        return poison, await stored_in(cluster, dead_letter_topic(group)), stats

    with retry_cluster(tmp_path) as cluster:
        poison, dlq, stats = asyncio.run(scenario(cluster))

    assert len(poison) == 2
    for shard, tries in attempts.items():
        assert [times for _, times in tries] == list(range(max_times + 1)), shard
        for (before, _), (after, _) in itertools.pairwise(tries):
            assert after - before >= suspend_ms / 1000 - TIMESTAMP_SLACK_S
        sequence = [seq for _, seq in consumed[shard]]
        assert sequence == [s for s in range(per_queue) if s != poison_at]
        given_up = tries[-1][0]
        assert all(at > given_up for at, seq in consumed[shard] if seq > poison_at)
    assert Counter(m.uniq_key for m in dlq) == Counter(poison.values())  # each exactly once
    for m in dlq:
        assert m.reconsume_times == max_times
        assert m.properties[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == TOPIC
        assert m.properties[props.DLQ_ORIGIN_MESSAGE_ID] == m.uniq_key
    assert stats.retry_sends == 2
    assert stats.local_retries == 2 * max_times


def test_the_consumers_maximum_overrides_the_groups(tmp_path: Path) -> None:
    group = "max-consumer"
    deliveries: dict[str, list[Delivery]] = defaultdict(list)

    async def scenario(cluster: Cluster) -> tuple[list[SendResult], list[StoredMessage]]:
        async with AdminClient(cluster.name_servers) as admin:
            await admin.create_group(SubscriptionGroupConfig(group, retry_max_times=5))
            await create_topic(admin, TOPIC, 2)
            listener, _ = recorder(deliveries, succeed_from=99)
            settings = ConsumerSettings(max_reconsume_times=2)
            async with consumer(cluster, group, listener, settings) as c:
                await settled([c], 6)
                sent = await send(cluster)

                async def all_dead() -> list[StoredMessage] | None:
                    found = await stored_in(cluster, dead_letter_topic(group))
                    return found if len(found) >= COUNT else None

                dlq: list[StoredMessage] = await eventually(all_dead, 20, what="dead letters")
            for broker in cluster.brokers.values():
                config = (await admin.group_configs(broker.address))[group]
                assert config.retry_max_times == 5
        return sent, dlq

    with retry_cluster(tmp_path) as cluster:
        sent, dlq = asyncio.run(scenario(cluster))
    keys = {s.msg_id for s in sent}
    assert {k: [times for _, times, _, _ in d] for k, d in deliveries.items()} == {
        k: [0, 1, 2] for k in keys
    }
    assert Counter(m.uniq_key for m in dlq) == Counter(keys)
    assert {m.reconsume_times for m in dlq} == {3}
