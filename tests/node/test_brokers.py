"""Brokers as the StatefulSet runs them: a broker pod deleted comes back on its volume with
every acknowledged message and its pending delayed deliveries; the cluster scales up, scales
down only once the broker to remove is drained, and rolls its brokers when their settings
change."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconsume.client.producer import Producer
from reconsume.message import properties as props
from reconsume.message.model import Message, StoredMessage
from reconsume.wire.codes import RequestCode

from ..integration.retry_support import read_queue
from ..integration.wire_client import BrokerClient, ok
from .node import Node
from .support import (
    DEMO_NAMESPACE,
    condition,
    get,
    items,
    name_server,
    pod_ready,
    ready,
    run,
    wait_for,
)
from .workloads import (
    BROKER_SELECTOR,
    CLUSTER,
    apply_topic_and_group,
    broker_address,
    patch_cluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC, GROUP_RESOURCE, GROUP = "lifecycle", "lifecycle-consumer", "GID_lifecycle"
DELAY_LEVEL, DELAY_MS = 3, 10_000
"""Level 3 of the example cluster's delay levels (``1s 5s 10s ...``)."""


@pytest.fixture
def lifecycle(examples: Node) -> Node:
    """The examples, and a Topic and ConsumerGroup of these tests."""
    apply_topic_and_group(examples, TOPIC, GROUP_RESOURCE, GROUP)
    return examples


def read_topic(address: str, queues: int = 2) -> list[StoredMessage]:
    async def read() -> list[StoredMessage]:
        async with BrokerClient() as client:
            found: list[StoredMessage] = []
            for queue_id in range(queues):
                found += await read_queue(client, address, TOPIC, queue_id)
            return found

    return run(read())


def test_a_deleted_broker_pod_comes_back_on_its_volume(lifecycle: Node) -> None:
    node = lifecycle
    broker = f"{CLUSTER}-broker-0"
    old_pod = get(node, "pod", broker, DEMO_NAMESPACE)
    assert old_pod is not None
    claim = get(node, "pvc", f"store-{broker}", DEMO_NAMESPACE)
    assert claim is not None

    async def send() -> tuple[list[tuple[int, int, bytes]], list[bytes]]:
        """50 messages through the name server (the acknowledged positions of those stored on
        broker-0) and 5 delayed ones to broker-0, still in its schedule when the pod goes."""
        acked = []
        async with Producer([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as producer:
            for index in range(50):
                body = f"kept-{index}".encode()
                result = await producer.send(Message(TOPIC, body))
                if result.queue.broker_name == broker:
                    acked.append((result.queue.queue_id, result.queue_offset, body))
        delayed = [f"delayed-{index}".encode() for index in range(5)]
        async with BrokerClient() as client:
            for index, body in enumerate(delayed):
                delay = {props.DELAY_TIME_LEVEL: str(DELAY_LEVEL)}
                address = broker_address(node, broker)
                ok(await client.send(address, TOPIC, body, queue_id=index % 2, properties=delay))
        return acked, delayed

    acked, delayed = run(send())
    assert acked, "no message went to the broker that is deleted"
    node.kubectl("-n", DEMO_NAMESPACE, "delete", "pod", broker, "--wait=true", timeout_s=120)
    new_pod = wait_for(
        lambda: (
            (pod := get(node, "pod", broker, DEMO_NAMESPACE))
            and pod["metadata"]["uid"] != old_pod["metadata"]["uid"]
            and pod_ready(pod)
            and pod
        ),
        180,
        f"{broker} re-created and ready",
        node,
    )
    # The same claim, so the same volume.
    (store,) = [v for v in new_pod["spec"]["volumes"] if v["name"] == "store"]
    assert store["persistentVolumeClaim"]["claimName"] == f"store-{broker}"
    reclaimed = get(node, "pvc", f"store-{broker}", DEMO_NAMESPACE)
    assert reclaimed is not None
    assert reclaimed["spec"]["volumeName"] == claim["spec"]["volumeName"]
    address = f"{new_pod['status']['podIP']}:10911"
    wait_for(
        lambda: (
            ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and broker_address(node, broker) == address
        ),
        120,
        "the new pod registered",
        node,
    )
    stored = {(m.queue_id, m.queue_offset): m.body for m in read_topic(address)}
    for queue_id, offset, body in acked:
        assert stored.get((queue_id, offset)) == body, (queue_id, offset)

    # The delayed messages were in the schedule topic across the restart: they arrive, and
    # not before their delay.
    def delivered() -> list[StoredMessage] | None:
        found = [m for m in read_topic(address) if m.body in delayed]
        return len(found) == len(delayed) and found

    for message in wait_for(delivered, 120, "the delayed messages delivered", node):
        assert message.store_timestamp_ms - message.born_timestamp_ms >= DELAY_MS, message


def test_brokers_scale_up_and_down_and_roll_on_a_settings_change(lifecycle: Node) -> None:
    node = lifecycle
    patch_cluster(node, {"brokers": 3})
    wait_for(
        lambda: (
            (c := get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and ready(c)
            and len(c["status"]["brokers"]) == 3
        ),
        240,
        "3 brokers registered",
        node,
    )
    group = wait_for(
        lambda: (
            (g := get(node, "consumergroup", GROUP_RESOURCE, DEMO_NAMESPACE))
            and len((g.get("status") or {}).get("brokers") or []) == 3
            and g
        ),
        120,
        "the ConsumerGroup configured on the third broker",
        node,
    )
    assert ready(group)
    # Messages on the third broker block its removal until they are consumed.
    address = broker_address(node, f"{CLUSTER}-broker-2")

    async def fill() -> None:
        async with BrokerClient() as client:
            for index in range(20):
                ok(await client.send(address, TOPIC, f"on-2-{index}".encode(), queue_id=index % 2))

    run(fill())
    patch_cluster(node, {"brokers": 2})
    blocked = wait_for(
        lambda: (
            (c := get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and condition(c).get("reason") == "ScaleDownBlocked"
            and c
        ),
        120,
        "ScaleDownBlocked",
        node,
    )
    assert "orders-broker-2" in condition(blocked)["message"]
    statefulset = get(node, "statefulset", f"{CLUSTER}-broker", DEMO_NAMESPACE)
    assert statefulset is not None
    assert statefulset["spec"]["replicas"] == 3

    async def consume() -> None:
        """GID_lifecycle consumes everything there: it commits the ends of the queues."""
        async with BrokerClient() as client:
            for queue_id in (0, 1):
                messages = await read_queue(client, address, TOPIC, queue_id)
                end = max(m.queue_offset for m in messages) + 1
                ok(await client.update_offset(address, GROUP, TOPIC, queue_id, end))

    run(consume())
    wait_for(
        lambda: (
            (s := get(node, "statefulset", f"{CLUSTER}-broker", DEMO_NAMESPACE))
            and s["spec"]["replicas"] == 2
            and get(node, "pod", f"{CLUSTER}-broker-2", DEMO_NAMESPACE) is None
        ),
        240,
        "the StatefulSet scaled down to 2",
        node,
    )
    wait_for(
        lambda: ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)),
        120,
        "Ready with 2 brokers",
        node,
    )
    # The operator says why it removed the broker.
    events = node.kubectl(
        "-n", DEMO_NAMESPACE, "get", "events", "--field-selector",
        f"involvedObject.name={CLUSTER},reason=ScalingDown", "-o", "json",
    )  # fmt: skip
    messages = [event["message"] for event in json.loads(events.stdout)["items"]]
    assert any("orders-broker-2 drained" in message for message in messages), messages

    # A settings-only change (the delay levels) restarts the brokers.
    before = {
        pod["metadata"]["name"]: pod["metadata"]["uid"]
        for pod in items(node, "pods", DEMO_NAMESPACE, BROKER_SELECTOR)
    }
    levels = "1s 2s 3s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    patch_cluster(node, {"delayLevels": levels})
    wait_for(
        lambda: all(
            (p := get(node, "pod", name, DEMO_NAMESPACE))
            and p["metadata"]["uid"] != uid
            and pod_ready(p)
            for name, uid in before.items()
        ),
        300,
        "every broker restarted",
        node,
    )

    def registered_as_running() -> dict[str, str] | None:
        """Ready, with the address of each broker's new pod in the status."""
        cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)
        pods = items(node, "pods", DEMO_NAMESPACE, BROKER_SELECTOR)
        status = (cluster or {}).get("status") or {}
        addresses = {b["name"]: b["address"] for b in status.get("brokers") or []}
        expected = {p["metadata"]["name"]: f"{p['status'].get('podIP')}:10911" for p in pods}
        return ready(cluster) and addresses == expected and addresses

    addresses = wait_for(registered_as_running, 120, "Ready after the roll, new addresses", node)
    assert set(addresses) == set(before)

    async def levels_in_effect() -> set[str]:
        async with BrokerClient() as client:
            found = set()
            for broker in addresses.values():
                response = ok(await client.invoke(broker, RequestCode.GET_BROKER_CONFIG))
                config: dict[str, Any] = dict(
                    line.split("=", 1)
                    for line in response.body.decode().splitlines()
                    if "=" in line
                )
                found.add(config["messageDelayLevel"])
            return found

    assert run(levels_in_effect()) == {levels}
