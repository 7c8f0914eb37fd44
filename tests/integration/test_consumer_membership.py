"""Consumers joining, leaving and outliving a broker crash, against real processes."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.client.routes import MessageQueue
from reconsume.client.settings import ConsumerSettings
from reconsume.message.model import Message

from .cluster import Cluster, Collector, create_topic, send_all, settled
from .wire_client import eventually

TOPIC = "payments"
GROUP = "payments-consumer"


def consumer(cluster: Cluster, name: str, listener: Collector) -> PushConsumer:
    c = PushConsumer(cluster.name_servers, GROUP, settings=ConsumerSettings(instance_name=name))
    c.subscribe(TOPIC)
    c.register_listener(listener)
    return c


async def produce_steadily(
    producer: Producer, results: list[SendResult], stop: asyncio.Event, prefix: str
) -> None:
    """Send in small concurrent bursts until ``stop`` is set."""
    for burst in itertools.count():
        if stop.is_set():
            return
        results.extend(
            await send_all(
                producer, (Message(TOPIC, f"{prefix}{burst}-{i}".encode()) for i in range(20))
            )
        )
        await asyncio.sleep(0.01)


async def _true(value: bool) -> bool:
    return value


def test_joining_and_leaving_consumers_rebalance_without_loss(cluster: Cluster) -> None:
    async def scenario() -> tuple[list[str], list[Collector], list[frozenset[MessageQueue]]]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 4)
        collectors = [Collector(), Collector(), Collector()]
        c1, c2, c3 = (consumer(cluster, f"m{i}", collectors[i]) for i in range(3))
        sent: list[SendResult] = []
        stop = asyncio.Event()
        shares: list[frozenset[MessageQueue]] = []
        async with Producer(cluster.name_servers) as producer:
            await c1.start()
            await settled([c1], 10)
            sending = asyncio.ensure_future(produce_steadily(producer, sent, stop, "x"))
            await eventually(lambda: _true(len(sent) > 500), what="traffic before the join")
            await c2.start()  # joins while messages flow
            await settled([c1, c2], 10)
            await c3.start()
            await settled([c1, c2, c3], 10)
            shares = [c.assigned for c in (c1, c2, c3)]
            await eventually(lambda: _true(len(sent) > 3000), 30, what="traffic after the joins")
            await c1.shutdown()  # leaves while messages flow
            await settled([c2, c3], 10)
            await eventually(lambda: _true(len(sent) > 4500), 30, what="traffic after leaving")
            stop.set()
            await sending
            expected = {r.msg_id for r in sent}

            async def everything() -> bool:
                received = set().union(*(set(c.received) for c in collectors))
                return expected <= received

            await eventually(everything, 30, what="every sent message consumed")
            await c2.shutdown()
            await c3.shutdown()
        return [r.msg_id for r in sent], collectors, shares

    sent, collectors, shares = asyncio.run(scenario())
    received = [key for c in collectors for key in c.received]
    assert set(sent) <= set(received)
    assert all(len(c.received) > 0 for c in collectors)
    # While three consumers were in the group, each read a share of the topic's 8 queues.
    assert sorted(sum(q.topic == TOPIC for q in s) for s in shares) == [2, 3, 3]
    # Handing a queue over commits first: re-deliveries stay rare.
    assert len(received) - len(set(received)) < len(sent) // 20


@pytest.mark.crash
def test_a_killed_broker_loses_no_acknowledged_message_and_consumers_resume(
    cluster: Cluster,
) -> None:
    async def scenario() -> tuple[list[str], list[str], Collector]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, TOPIC, 4)
            collector = Collector()
            c = consumer(cluster, "survivor", collector)
            async with Producer(cluster.name_servers) as producer:
                await c.start()
                await settled([c], 10)
                before = await send_all(
                    producer, (Message(TOPIC, f"before {i}".encode()) for i in range(1000))
                )
                await eventually(
                    lambda: _true(len(collector.received) >= 1000), 30, what="first 1000"
                )

                async def committed() -> bool:
                    progress = await admin.consumer_progress(GROUP, TOPIC)
                    return sum(p.lag for p in progress) == 0

                await eventually(committed, 20, what="offsets committed")
                # SIGKILL broker-a while sends continue: acknowledged sends must survive.
                during: list[SendResult] = []
                stop = asyncio.Event()
                sending = asyncio.ensure_future(produce_steadily(producer, during, stop, "d"))
                await eventually(lambda: _true(len(during) > 200), what="traffic")
                cluster.restart("broker-a")
                await eventually(lambda: _true(len(during) > 1500), 60, what="after restart")
                stop.set()
                await sending
                expected = {r.msg_id for r in during}

                async def everything() -> bool:
                    return expected <= set(collector.received)

                await eventually(everything, 60, what="every acknowledged message consumed")
                await c.shutdown()
        return [r.msg_id for r in before], [r.msg_id for r in during], collector

    before, during, collector = asyncio.run(scenario())
    counts = collector.counts()
    assert set(during) <= set(counts)
    # The consumer resumed broker-a's queues from committed offsets: nothing committed before
    # the crash came again.
    assert all(counts[key] == 1 for key in before)
