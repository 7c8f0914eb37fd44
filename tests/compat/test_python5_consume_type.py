"""Apache RocketMQ's Python client 5.x (``rocketmq-python-client``, unchanged) and a group's
declared consume type (ConsumerGroup ``spec.consumeType``, reconciled onto both brokers): a
SimpleConsumer of a PULL group is refused, and the client raises the broker's FORBIDDEN
message naming the group and its type; of a POP or ANY group it receives and acknowledges."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from reconsume.client.admin import AdminClient
from reconsume.topology import ConsumeType, Desired, DesiredGroup, apply, observe, plan

from ..integration.cluster import start_broker
from ..integration.processes import start_server
from .servers import BROKERS, Cluster, create_topic, stop_cleanly

TOPIC = "v5-consume-type"
CLIENT = r"""
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer

endpoints, topic, group = sys.argv[1:4]
config = ClientConfiguration(endpoints, Credentials(), request_timeout=5)
producer = Producer(config, (topic,))
producer.startup()
try:
    message = Message()
    message.topic = topic
    message.body = group.encode()
    producer.send(message)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
consumer.startup()
try:
    for _ in range(20):
        try:
            received = consumer.receive(16, 10)
        except Exception as exc:
            print(json.dumps({"refused": f"{type(exc).__name__}: {exc}"}), flush=True)
            sys.exit(0)
        for m in received:
            consumer.ack(m)
            if m.body == group.encode():
                print(json.dumps({"acked": m.message_id}), flush=True)
                sys.exit(0)
finally:
    consumer.shutdown()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """Two brokers with gRPC services, a group of each consume type, and a gRPC endpoint."""
    root = tmp_path_factory.mktemp("v5-consume-type")
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    started = Cluster(namesrv)
    try:
        for name in BROKERS:
            started.brokers[name] = start_broker(
                namesrv.address, name, root / name, cluster="v5",
                extra=("--grpc-listen", "127.0.0.1:0"),
            )  # fmt: skip
        asyncio.run(create_topic(started, TOPIC))
        asyncio.run(_declare(namesrv.address))
        yield started, started.brokers[BROKERS[0]].grpc_address
    finally:
        stop_cleanly(started.brokers, namesrv)


async def _declare(namesrv: str) -> None:
    groups = [DesiredGroup(f"v5-{kind.value.lower()}", consume_type=kind) for kind in ConsumeType]
    desired = Desired(groups=tuple(groups))
    async with AdminClient([namesrv]) as admin:
        result = await apply(plan(desired, await observe(admin, desired)), admin)
        assert result.ok, result.describe()


def _run(endpoint: str, group: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, endpoint, TOPIC, group],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.stdout.splitlines()
    result: dict[str, str] = json.loads(line)
    return result


def test_a_pull_group_is_refused_with_its_group_and_type_named(
    cluster: tuple[Cluster, str],
) -> None:
    _servers, endpoint = cluster
    result = _run(endpoint, "v5-pull")
    assert result == {
        "refused": "ForbiddenException: 40300, group v5-pull may not be consumed by RocketMQ 5 "
        "clients: its consume type is PULL (RocketMQ 4.x pull and push consumers only)"
    }


@pytest.mark.parametrize("group", ["v5-pop", "v5-any"])
def test_pop_and_any_groups_receive_and_acknowledge(
    cluster: tuple[Cluster, str], group: str
) -> None:
    _servers, endpoint = cluster
    assert "acked" in _run(endpoint, group)
