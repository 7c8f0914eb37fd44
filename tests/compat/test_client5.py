"""Apache RocketMQ's 5.x clients — the Java client (rocketmq-client-java) and the Python client
(rocketmq-python-client), unchanged, through the drivers of ``client5_support`` — against a
name server and two brokers serving gRPC (``--grpc-listen``): sends of every kind, the simple
consumer's receive, acknowledgement, change of invisible duration and redelivery with its
attempt counted, the push consumer's retries at its group's exponential policy, FIFO order
under failure, dead letters at the group's maximum, and both directions between 4.x and 5.x
clients. The same drivers pass against Apache RocketMQ 5.3.3's broker and proxy
(``validate_client5``)."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.sync import SyncProducer, SyncPushConsumer
from reconsume.message import properties as props
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic

from ..integration.cluster import start_broker
from ..integration.processes import start_server
from ..integration.retry_support import TEST_DELAY_LEVELS
from ..integration.wire_client import BrokerClient, ok
from ..polling import eventually, eventually_async
from .client5_support import run_client5
from .driver_support import DriverRun
from .servers import (
    BROKERS,
    QUEUES_PER_BROKER,
    Cluster,
    create_topic,
    read_all,
    stop_cleanly,
)

EXPONENTIAL = {
    "type": "EXPONENTIAL",
    "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2},
}
CUSTOMIZED = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}}
GROUPS = {
    "v5_simple": {},
    "v5_push": {"groupRetryPolicy": EXPONENTIAL},
    "v5_push_customized": {"groupRetryPolicy": CUSTOMIZED},
    "v5_fifo": {"consumeMessageOrderly": True, "retryMaxTimes": 3},
    "v5_dead": {"retryMaxTimes": 1, "groupRetryPolicy": EXPONENTIAL},
}
DRIVERS = ("java", "python")
POLL_MS = 5000
"""The drivers' simple consumers wait this long in a receive; the message that comes back
while none is held waits for the next (as against Apache RocketMQ's proxy)."""
SLACK_MS = 2000


@contextmanager
def client5_cluster(root: Path, *, ipv6: bool = False) -> Iterator[tuple[Cluster, str]]:
    """Two brokers with gRPC services and :data:`GROUPS`; the first broker's gRPC address
    (the clients' endpoint: its routes name both). With ``ipv6`` the servers listen on every
    interface and the brokers advertise ``::1``, as pods of an IPv6 cluster."""
    listen, advertise = (":0", ("--advertise", "[::1]:0")) if ipv6 else ("127.0.0.1:0", ())
    namesrv = start_server("namesrv", "--listen", listen)
    if ipv6:
        namesrv.address = f"[::1]{namesrv.address}"  # it says "listening on :PORT"
    started = Cluster(namesrv)
    try:
        for name in BROKERS:
            started.brokers[name] = start_broker(
                namesrv.address, name, root / name, cluster="client5", listen=listen,
                extra=("--grpc-listen", listen, "--delay-levels", TEST_DELAY_LEVELS, *advertise),
            )  # fmt: skip
        asyncio.run(_create_groups(started))
        first = started.brokers[BROKERS[0]]
        match = re.search(r"serving gRPC on (\S+)", "".join(first.output))
        assert match is not None, "".join(first.output)
        yield started, match.group(1)
    finally:
        stop_cleanly(started.brokers, namesrv)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with client5_cluster(tmp_path_factory.mktemp("client5")) as started:
        yield started


@pytest.fixture(scope="module")
def either_family(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str]]:
    """:func:`cluster`, or one the clients reach over IPv6 (its endpoint ``[::1]:PORT``)."""
    if request.param == "IPv4":
        yield request.getfixturevalue("cluster")
        return
    with client5_cluster(tmp_path_factory.mktemp("client5-ipv6"), ipv6=True) as started:
        yield started


async def _create_groups(cluster: Cluster) -> None:
    async with BrokerClient() as admin:
        for broker in cluster.brokers.values():
            for group, config in GROUPS.items():
                ok(await admin.create_group(broker.address, {"groupName": group, **config}))


def _topic(cluster: Cluster, name: str) -> str:
    asyncio.run(create_topic(cluster, name))
    return name


def _one_broker_topic(cluster: Cluster, name: str) -> str:
    """A topic on the first broker only: a simple consumer's receives all go to it (with two
    brokers it picks one per receive, and a message that came back waits out the receives
    held at the other)."""

    async def create() -> None:
        async with BrokerClient() as admin:
            broker = cluster.brokers[BROKERS[0]]
            ok(await admin.create_topic(broker.address, name, QUEUES_PER_BROKER))

            async def routed() -> bool:
                route = await admin.route(cluster.namesrv.address, name) or {}
                return bool(route.get("queueDatas"))

            await eventually_async(routed, what=f"route of {name}")

    asyncio.run(create())
    return name


def _by_body(run: DriverRun) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = defaultdict(list)
    for event in run["received"]:
        found[str(event["body"])].append(event)
    return found


# rocketmq-python-client cannot reach an IPv6 broker: it makes the gRPC target of an IPv6
# address without brackets (``ipv6:::1:PORT``), which gRPC refuses as an invalid URI, and
# splits a configured endpoint at its first ':'.
@pytest.mark.parametrize(
    ("either_family", "driver"),
    [("IPv4", "java"), ("IPv4", "python"), ("IPv6", "java")],
    indirect=["either_family"],
)
def test_sent_messages_are_received_and_acknowledged(
    either_family: tuple[Cluster, str],
    client5_drivers: tuple[str, ...],
    driver: str,
    tmp_path: Path,
) -> None:
    servers, endpoint = either_family
    topic = _topic(servers, f"v5-plain-{driver}")
    sent = run_client5(driver, "send", endpoint, tmp_path / "send", topic=topic, count=10,
                       tag="tagA", prefix="plain")["sent"]  # fmt: skip
    assert len({s["messageId"] for s in sent}) == 10
    run = run_client5(driver, "simple-consume", endpoint, tmp_path / "consume", topic=topic,
                      group="v5_simple", count=10, prefix="plain")  # fmt: skip
    received = _by_body(run)
    assert set(received) == {f"plain {i}" for i in range(10)}
    for s in sent:
        (event,) = [e for e in run["received"] if e["messageId"] == s["messageId"]]
        assert event["tag"] == "tagA"
        assert event["deliveryAttempt"] == 1
        assert event["properties"] == s["properties"], (event, s)
        assert sorted(event["keys"]) == sorted(s["keys"])  # type: ignore[arg-type]
    assert len(run["acked"]) == 10


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_message_not_acknowledged_comes_back_after_its_invisible_duration(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], driver: str, tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _one_broker_topic(servers, f"v5-redeliver-{driver}")
    run_client5(driver, "send", endpoint, tmp_path / "send", topic=topic, count=4, prefix="again")
    run = run_client5(driver, "simple-consume", endpoint, tmp_path / "consume", topic=topic,
                      group="v5_simple", count=4, prefix="again", fail_first=True,
                      invisible_ms=2000)  # fmt: skip
    for body, deliveries in _by_body(run).items():
        assert [d["deliveryAttempt"] for d in deliveries] == [1, 2], body
        # The invisible time starts when the broker hands the first copy out: after the
        # receive call that got it was made, before the client saw the answer (which a
        # busy client may see late). Bounded below by the one (less a tick of the
        # millisecond clocks), above by the other.
        since_asked = int(deliveries[1]["sinceLastAskedMs"])  # type: ignore[call-overload]
        waited = int(deliveries[1]["sinceLastDeliveryMs"])  # type: ignore[call-overload]
        assert since_asked >= 2000 - 1, (body, since_asked)
        assert waited <= 2000 + POLL_MS + SLACK_MS, (body, waited)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_changed_invisible_duration_is_when_the_message_comes_back(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], driver: str, tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _one_broker_topic(servers, f"v5-change-{driver}")
    run_client5(driver, "send", endpoint, tmp_path / "send", topic=topic, count=2, prefix="moved")
    run = run_client5(driver, "simple-consume", endpoint, tmp_path / "consume", topic=topic,
                      group="v5_simple", count=2, prefix="moved", invisible_ms=20000,
                      change_invisible_ms=3000)  # fmt: skip
    assert len(run["invisibleChanged"]) == 2
    for body, deliveries in _by_body(run).items():
        assert [d["deliveryAttempt"] for d in deliveries] == [1, 2], body
        waited = int(deliveries[1]["sinceLastDeliveryMs"])  # type: ignore[call-overload]
        # not the 20 s it was received with
        assert 2900 <= waited <= 3000 + POLL_MS + SLACK_MS, (body, waited)


@pytest.mark.parametrize(
    ("driver", "group"),
    [
        # The Python client 5.1.2 applies only customized policies (an exponential one it
        # replaces by its own default): each client with the kind it applies.
        pytest.param("java", "v5_push", id="java-exponential"),
        pytest.param("python", "v5_push_customized", id="python-customized"),
    ],
)
def test_a_push_consumer_retries_at_its_groups_policy(
    cluster: tuple[Cluster, str],
    client5_drivers: tuple[str, ...],
    driver: str,
    group: str,
    tmp_path: Path,
) -> None:
    servers, endpoint = cluster
    topic = _topic(servers, f"v5-push-{driver}")
    run_client5(driver, "send", endpoint, tmp_path / "send", topic=topic, count=3, prefix="push")
    run = run_client5(driver, "push-consume", endpoint, tmp_path / "consume", topic=topic,
                      group=group, count=3, prefix="push", fail_times=2)  # fmt: skip
    for body, deliveries in _by_body(run).items():
        assert [d["deliveryAttempt"] for d in deliveries] == [1, 2, 3], body
        gaps = [int(d["sinceLastDeliveryMs"]) for d in deliveries[1:]]  # type: ignore[call-overload]
        # both policies: 1 s after the first failure, 2 s after the second
        assert 900 <= gaps[0] <= 1900, (body, gaps)
        assert 1900 <= gaps[1] <= 3200, (body, gaps)


@pytest.mark.parametrize("driver", DRIVERS)
def test_fifo_groups_keep_each_message_groups_order_through_failures(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], driver: str, tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _topic(servers, f"v5-fifo-{driver}")
    run_client5(driver, "send-fifo", endpoint, tmp_path / "send", topic=topic, count=8,
                message_groups=2, prefix="fifo")  # fmt: skip
    run = run_client5(driver, "fifo-consume", endpoint, tmp_path / "consume", topic=topic,
                      group="v5_fifo", count=8, prefix="fifo", fail_times=1)  # fmt: skip
    orders = {str(e["messageGroup"]): e for e in run["order"]}
    assert set(orders) == {"fifo-g0", "fifo-g1"}
    for event in orders.values():
        assert event["inOrder"] is True, event
        assert event["seqs"] == [0, 1, 2, 3], event


def test_messages_failing_past_the_groups_maximum_are_dead_letters_with_their_origin(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _topic(servers, "v5-dead")
    sent = run_client5("python", "send", endpoint, tmp_path / "send", topic=topic, count=2,
                       prefix="dead")["sent"]  # fmt: skip
    # Never succeeds: after its 2 attempts (retryMaxTimes 1) each message is a dead letter.
    run = run_client5("python", "push-consume", endpoint, tmp_path / "consume", 25.0,
                      check=False, topic=topic, group="v5_dead", count=2, prefix="dead",
                      fail_times=99)  # fmt: skip
    for deliveries in _by_body(run).values():
        assert [d["deliveryAttempt"] for d in deliveries][:2] == [1, 2]

    def dead_letters() -> dict[str, dict[str, str]] | None:
        found = {}
        for messages in asyncio.run(read_all(servers, dead_letter_topic("v5_dead"))).values():
            for message in messages:
                found[message.properties[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]] = dict(
                    message.properties
                )
        return found if len(found) == 2 else None

    dead = eventually(dead_letters, what="both messages in %DLQ%v5_dead")
    for s in sent:
        properties = dead[str(s["messageId"])]
        assert properties[props.DLQ_ORIGIN_TOPIC] == topic
        assert properties[props.DLQ_ORIGIN_MESSAGE_ID] == s["messageId"]


def test_a_4x_producers_messages_reach_a_5x_consumer(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _topic(servers, "v5-from-4x")
    ids = set()
    with SyncProducer([servers.namesrv.address]) as producer:
        for i in range(6):
            result = producer.send(Message(topic, f"from 4.x {i}".encode(), {props.TAGS: "old"}))
            ids.add(result.msg_id)
    run = run_client5("java", "simple-consume", endpoint, tmp_path / "consume", topic=topic,
                      group="v5_simple", count=6, prefix="from 4.x")  # fmt: skip
    assert {str(e["messageId"]) for e in run["received"]} == ids
    assert {e["tag"] for e in run["received"]} == {"old"}


def test_a_5x_producers_messages_reach_a_4x_consumer(
    cluster: tuple[Cluster, str], client5_drivers: tuple[str, ...], tmp_path: Path
) -> None:
    servers, endpoint = cluster
    topic = _topic(servers, "v5-to-4x")
    sent = run_client5("java", "send", endpoint, tmp_path / "send", topic=topic, count=6,
                       prefix="to 4.x")["sent"]  # fmt: skip
    received: dict[str, bytes] = {}
    consumer = SyncPushConsumer([servers.namesrv.address], "v4_reader")
    consumer.subscribe(topic)

    def listener(messages: list[StoredMessage], _context: ConcurrentContext) -> ConsumeStatus:
        for message in messages:
            received[message.uniq_key or message.msg_id] = message.body
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    consumer.start()
    try:
        eventually(lambda: len(received) >= 6, what="the 4.x consumer's 6 messages")
    finally:
        consumer.shutdown()
    assert set(received) == {str(s["messageId"]) for s in sent}
    assert sorted(received.values()) == sorted(f"to 4.x {i}".encode() for i in range(6))


def test_bad_requests_get_the_protocols_codes_and_the_service_goes_on(
    cluster: tuple[Cluster, str],
) -> None:
    from reconsume.wire.v2 import definition_pb2 as pb
    from reconsume.wire.v2 import service_pb2 as spb

    servers, endpoint = cluster
    topic = _topic(servers, "v5-bad")
    service = "/apache.rocketmq.v2.MessagingService/"
    with grpc.insecure_channel(endpoint) as channel:
        raw = channel.unary_unary(service + "SendMessage")
        with pytest.raises(grpc.RpcError) as failed:
            raw(b"\xff\xff\xff not protobuf", timeout=5)
        assert failed.value.code() == grpc.StatusCode.INTERNAL
        assert "Invalid protobuf byte sequence" in (failed.value.details() or "")

        def call(name: str, request: object, response: type) -> object:
            method = channel.unary_unary(
                service + name,
                request_serializer=type(request).SerializeToString,  # type: ignore[attr-defined]
                response_deserializer=response.FromString,  # type: ignore[attr-defined]
            )
            return method(request, timeout=5)

        ack = call("AckMessage", spb.AckMessageRequest(
            group=pb.Resource(name="v5_simple"), topic=pb.Resource(name=topic),
            entries=[spb.AckMessageEntry(message_id="m", receipt_handle="forged")],
        ), spb.AckMessageResponse)  # fmt: skip
        assert ack.status.code == pb.INVALID_RECEIPT_HANDLE  # type: ignore[attr-defined]
        route = call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name="bad topic!")),
                     spb.QueryRouteResponse)  # fmt: skip
        assert route.status.code == pb.ILLEGAL_TOPIC  # type: ignore[attr-defined]
        unknown = call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name="v5-none")),
                       spb.QueryRouteResponse)  # fmt: skip
        assert unknown.status.code == pb.TOPIC_NOT_FOUND  # type: ignore[attr-defined]
        good = call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                    spb.QueryRouteResponse)  # fmt: skip
        assert good.status.code == pb.OK  # type: ignore[attr-defined]
        assert len(good.message_queues) == QUEUES_PER_BROKER * len(BROKERS)  # type: ignore[attr-defined]
    assert all(b.process.poll() is None for b in servers.brokers.values())
