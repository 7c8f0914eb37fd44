"""ConsumerGroup ``spec.consumeType`` on a real name server and broker serving both protocols:
the reconcile stores it as the group's ``consume.type`` attribute; a POP group refuses our 4.x
client's pulls and offset commits with NO_PERMISSION naming the group and its type, while a
RocketMQ 5 ReceiveMessage (a direct gRPC call) gets its messages; a PULL group refuses
ReceiveMessage with FORBIDDEN, while pulls and commits work; ANY serves both, as before the
field; a changed type takes effect at once; the broker refuses an unknown type."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.client.pull import pull_once
from reconsume.client.routes import MessageQueue
from reconsume.errors import RemotingError
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message
from reconsume.topology import ConsumeType, Desired, DesiredGroup, apply, observe, plan
from reconsume.wire.codes import ResponseCode
from reconsume.wire.errors import NoPermissionError
from reconsume.wire.v2 import definition_pb2 as pb
from reconsume.wire.v2 import service_pb2 as spb

from ..scratch import module_dir
from .cluster import Cluster, start_cluster
from .wire_client import eventually

TOPIC = "consume-type-orders"
BROKER = "broker-a"
QUEUE = MessageQueue(TOPIC, BROKER, 0)
SENT = 3


@dataclass
class Servers:
    cluster: Cluster
    grpc: str

    @property
    def address(self) -> str:
        return self.cluster.brokers[BROKER].address


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """One broker with a gRPC service, and a one-queue topic holding :data:`SENT` messages."""
    with module_dir(tmp_path_factory, "consume-type") as root:
        cluster = start_cluster(root, (BROKER,), extra=("--grpc-listen", "127.0.0.1:0"))
        try:
            asyncio.run(_topic_with_messages(cluster))
            yield Servers(cluster, cluster.brokers[BROKER].grpc_address)
        finally:
            cluster.kill()


async def _topic_with_messages(cluster: Cluster) -> None:
    async with AdminClient(cluster.name_servers) as admin:
        await admin.create_topic(TOPIC, queues=1)

        async def routed() -> bool:
            return await admin.route(TOPIC) is not None

        await eventually(routed, what=f"route of {TOPIC}")
    async with Producer(cluster.name_servers) as producer:
        for i in range(SENT):
            await producer.send(Message(TOPIC, f"m{i}".encode()))


def _declare(servers: Servers, group: str, kind: ConsumeType) -> SubscriptionGroupConfig:
    """Reconcile the group with ``kind``; the config the broker then reports."""

    async def reconcile() -> SubscriptionGroupConfig:
        desired = Desired(groups=(DesiredGroup(group, consume_type=kind),))
        async with AdminClient(servers.cluster.name_servers) as admin:
            result = await apply(plan(desired, await observe(admin, desired)), admin)
            assert result.ok, result.describe()
            assert plan(desired, await observe(admin, desired)).actions == ()
            return (await admin.group_configs(servers.address))[group]

    return asyncio.run(reconcile())


def _pull(servers: Servers, group: str) -> list[bytes]:
    """Our 4.x client's pull of the queue from offset 0."""

    async def pull() -> list[bytes]:
        async with AdminClient(servers.cluster.name_servers) as admin:
            result = await pull_once(admin.broker_api, servers.address, QUEUE, 0, group=group)
        return [m.body for m in result.messages]

    return asyncio.run(pull())


def _commit(servers: Servers, group: str, offset: int) -> None:
    async def commit() -> None:
        async with AdminClient(servers.cluster.name_servers) as admin:
            await admin.update_consumer_offset(group, QUEUE, offset)

    asyncio.run(commit())


def _committed(servers: Servers, group: str) -> int:
    async def committed() -> int:
        async with AdminClient(servers.cluster.name_servers) as admin:
            return await admin.consumer_offset(group, QUEUE)

    return asyncio.run(committed())


def _receive(servers: Servers, group: str) -> tuple[pb.Status, list[bytes]]:
    """A RocketMQ 5 client's ReceiveMessage of the topic: its status and message bodies."""
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=32,
        invisible_duration=Duration(seconds=60),
        long_polling_timeout=Duration(seconds=1),
    )
    with grpc.insecure_channel(servers.grpc) as channel:
        call = channel.unary_stream(
            "/apache.rocketmq.v2.MessagingService/ReceiveMessage",
            request_serializer=spb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=spb.ReceiveMessageResponse.FromString,
        )
        responses = list(call(request, timeout=30))
    (status,) = [r.status for r in responses if r.HasField("status")]
    return status, [r.message.body for r in responses if r.HasField("message")]


def test_a_pop_group_refuses_4x_pulls_and_commits_and_serves_5x_clients(
    servers: Servers,
) -> None:
    group = "consume-type-pop"
    config = _declare(servers, group, ConsumeType.POP)
    assert (config.consume_type, dict(config.attributes)) == ("POP", {"consume.type": "POP"})
    with pytest.raises(RemotingError) as refused:
        _pull(servers, group)
    message = str(refused.value)
    assert f"{ResponseCode.NO_PERMISSION} subscription group no permission, {group}" in message
    assert "consume type is POP (RocketMQ 5 clients over gRPC only)" in message
    status, bodies = _receive(servers, group)
    assert status.code == pb.OK, status
    assert bodies == [f"m{i}".encode() for i in range(SENT)]
    leased = _committed(servers, group)  # the lowest offset leased: the first message's
    assert leased == 0
    with pytest.raises(NoPermissionError, match=f"{group}: its consume type is POP"):
        _commit(servers, group, SENT)
    assert _committed(servers, group) == leased


def test_a_pull_group_refuses_5x_receives_and_serves_4x_clients(servers: Servers) -> None:
    group = "consume-type-pull"
    assert _declare(servers, group, ConsumeType.PULL).consume_type == "PULL"
    status, bodies = _receive(servers, group)
    assert status.code == pb.FORBIDDEN, status
    assert status.message == (
        f"group {group} may not be consumed by RocketMQ 5 clients: its consume type is PULL "
        "(RocketMQ 4.x pull and push consumers only)"
    )
    assert bodies == []
    assert _pull(servers, group) == [f"m{i}".encode() for i in range(SENT)]
    _commit(servers, group, SENT)
    assert _committed(servers, group) == SENT


def test_any_serves_both_kinds_as_before(servers: Servers) -> None:
    group = "consume-type-any"
    config = _declare(servers, group, ConsumeType.ANY)
    assert (config.consume_type, dict(config.attributes)) == ("ANY", {})
    everything = [f"m{i}".encode() for i in range(SENT)]
    assert _pull(servers, group) == everything
    status, bodies = _receive(servers, group)
    assert (status.code, bodies) == (pb.OK, everything)
    _commit(servers, group, SENT)
    assert _committed(servers, group) == SENT


def test_a_changed_type_takes_effect_at_once(servers: Servers) -> None:
    group = "consume-type-changed"
    _declare(servers, group, ConsumeType.PULL)
    assert _receive(servers, group)[0].code == pb.FORBIDDEN
    assert dict(_declare(servers, group, ConsumeType.ANY).attributes) == {}
    assert _receive(servers, group)[0].code == pb.OK
    _declare(servers, group, ConsumeType.POP)
    with pytest.raises(RemotingError, match="consume type is POP"):
        _pull(servers, group)


def test_the_broker_refuses_an_unknown_type_naming_the_attribute(servers: Servers) -> None:
    config = SubscriptionGroupConfig("consume-type-bad", attributes={"consume.type": "BOTH"})

    async def create() -> None:
        async with AdminClient(servers.cluster.name_servers) as admin:
            await admin.create_group(config, brokers=[servers.address])

    with pytest.raises(RemotingError, match=r"attribute consume\.type 'BOTH' is not one of ANY"):
        asyncio.run(create())
