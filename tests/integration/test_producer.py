"""The Python producer against a real name server and two real brokers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.producer import Producer
from reconsume.client.routes import MessageQueue
from reconsume.message.model import Message
from reconsume.message.properties import UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from reconsume.wire.codes import ResponseCode

from .processes import ServerProcess, start_server
from .wire_client import BrokerClient, eventually, ok, records

GROUP = "producer-tests"


def start_broker(namesrv: str, name: str, store: Path) -> ServerProcess:
    return start_server(
        "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv, "--store-dir", str(store),
        "--broker-name", name, "--cluster", "producers", "--flush", "Sync",
    )  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    a = start_broker(namesrv.address, "broker-a", tmp_path / "a")
    b = start_broker(namesrv.address, "broker-b", tmp_path / "b")
    yield namesrv, a, b
    for process in (a, b):
        process.kill()
    assert namesrv.stop() == 0


async def pull_all(client: BrokerClient, addr: str, topic: str, queues: int) -> list[Any]:
    found = []
    for queue_id in range(queues):
        response = await client.pull(addr, GROUP, topic, queue_id, 0, max_nums=1000)
        if response.code == ResponseCode.SUCCESS:
            found.extend(records(response))
    return found


def test_sends_spread_over_both_brokers_and_arrive_intact(
    cluster: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    namesrv, a, b = cluster

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        async with BrokerClient() as admin:
            for broker in (a, b):
                ok(await admin.create_topic(broker.address, "spread", 2))

            async def routed() -> bool | None:
                route = await admin.route(namesrv.address, "spread")
                return True if route and len(route["queueDatas"]) == 2 else None

            await eventually(routed, what="route on both brokers")
            async with Producer([namesrv.address], GROUP) as producer:
                results = [
                    await producer.send(Message("spread", f"m{i}".encode(), {"KEYS": f"k{i}"}))
                    for i in range(40)
                ]
                chosen = await producer.send(
                    Message("spread", b"to b1"), queue=MessageQueue("spread", "broker-b", 1)
                )
            on_a = await pull_all(admin, a.address, "spread", 2)
            on_b = await pull_all(admin, b.address, "spread", 2)
        return [*results, chosen], on_a, on_b

    results, on_a, on_b = asyncio.run(scenario())
    assert Counter(r.queue.broker_name for r in results[:40]) == {"broker-a": 20, "broker-b": 20}
    assert results[-1].queue == MessageQueue("spread", "broker-b", 1)
    stored = {m.properties[UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: m for m in [*on_a, *on_b]}
    assert len(stored) == 41
    for result in results:
        message = stored[result.msg_id]
        assert message.msg_id == result.offset_msg_id
        assert message.queue_offset == result.queue_offset
    assert sorted(m.body for m in stored.values() if m.properties.get("KEYS")) == sorted(
        f"m{i}".encode() for i in range(40)
    )


def test_a_new_topic_is_auto_created_and_batches_stay_together(
    cluster: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    namesrv, a, b = cluster

    async def scenario() -> tuple[Any, list[Any]]:
        async with Producer([namesrv.address], GROUP) as producer:
            first = await producer.send(Message("fresh", b"hello"))
            batch = await producer.send_batch(
                [Message("fresh", f"b{i}".encode()) for i in range(5)],
                queue=first.queue,
            )
        broker = a if first.queue.broker_name == "broker-a" else b
        async with BrokerClient() as client:
            response = await client.pull(broker.address, GROUP, "fresh", first.queue.queue_id, 0)
        return batch, records(ok(response))

    batch, pulled = asyncio.run(scenario())
    assert [m.body for m in pulled] == [b"hello", b"b0", b"b1", b"b2", b"b3", b"b4"]
    assert batch.msg_id.split(",") == [
        m.properties[UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in pulled[1:]
    ]


def test_a_dead_broker_makes_sends_retry_on_the_other(
    cluster: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    namesrv, a, b = cluster

    async def scenario() -> list[str]:
        async with BrokerClient() as admin:
            for broker in (a, b):
                ok(await admin.create_topic(broker.address, "failover", 1))

            async def routed() -> bool | None:
                route = await admin.route(namesrv.address, "failover")
                return True if route and len(route["queueDatas"]) == 2 else None

            await eventually(routed, what="route on both brokers")
        async with Producer([namesrv.address], GROUP, send_timeout_s=2) as producer:
            await producer.send(Message("failover", b"warm-up"))
            a.kill()  # SIGKILL: its route stays until the name server notices
            return [
                (await producer.send(Message("failover", f"after-{i}".encode()))).queue.broker_name
                for i in range(6)
            ]

    assert asyncio.run(scenario()) == ["broker-b"] * 6
