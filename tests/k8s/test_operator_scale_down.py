"""Scaling an operator-run BrokerCluster's brokers down waits until the brokers to remove are
drained.

Nothing runs pods here, so the StatefulSet's brokers are local processes named like its pods
(``orders-broker-N`` in RocketMQ cluster ``orders``) registered with a local name server, which
the operator reaches through its name-server address template."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message.model import Message

from ..integration.cluster import Cluster, start_broker
from ..integration.processes import start_server
from ..polling import eventually_async
from .control_plane import ControlPlane
from .operator_support import (
    Resources,
    crds,
    eventually,
    namespace,
    resources,
    run_admin,
    running_operator,
)

__all__ = ["crds", "namespace", "resources"]

BROKERS = ("orders-broker-0", "orders-broker-1", "orders-broker-2")
TOPIC = "payments"
MESSAGES = 20


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[Cluster]:
    """A name server and three brokers named like the StatefulSet ``orders-broker``'s pods."""
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    extra = ("--register-interval-s", "1")
    started = Cluster(namesrv, {}, {name: tmp_path / name for name in BROKERS}, extra)
    try:
        for name, store in started.stores.items():
            started.brokers[name] = start_broker(
                namesrv.address, name, store, cluster="orders", extra=extra
            )
        started.wait_registered()
        yield started
    finally:
        started.kill()


def send_to_last_broker(pods: Cluster) -> None:
    """``MESSAGES`` messages in a topic only ``orders-broker-2`` has."""
    address = pods.brokers["orders-broker-2"].address

    async def work(admin: AdminClient) -> None:
        await admin.create_topic(TOPIC, queues=2, brokers=[address])
        await eventually_async(lambda: admin.route(TOPIC), 20, f"route of {TOPIC}", interval_s=0.1)
        async with Producer(pods.name_servers) as producer:
            for i in range(MESSAGES):
                await producer.send(Message(TOPIC, f"payment {i}".encode()))

    run_admin(pods.name_servers, work)


def consume_everything(pods: Cluster, group: str) -> None:
    """Commit ``group``'s offsets at the end of every queue of the topic."""

    async def work(admin: AdminClient) -> None:
        for row in await admin.consumer_progress(group, TOPIC):
            await admin.update_consumer_offset(group, row.queue, row.max_offset)

    run_admin(pods.name_servers, work)


def test_scaling_down_waits_until_the_brokers_to_remove_are_drained(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    pods: Cluster,
) -> None:
    ns = resources.namespace
    apps = kubernetes.client.AppsV1Api(api)
    core = kubernetes.client.CoreV1Api(api)

    def replicas() -> int | None:
        try:
            sts = apps.read_namespaced_stateful_set("orders-broker", ns)
        except ApiException:
            return None
        found: int = sts.spec.replicas
        return found

    with running_operator(ns, control_plane, name_server_template=pods.namesrv.address):
        resources.create("brokerclusters", "orders", {"brokers": 3})
        resources.wait_condition("brokerclusters", "orders", "True", "Running")
        assert replicas() == 3
        send_to_last_broker(pods)

        patch = {"spec": {"brokers": 2, "delayLevels": "1s 2s"}}
        resources.patch("brokerclusters", "orders", patch)
        blocked = resources.wait_condition("brokerclusters", "orders", "False", "ScaleDownBlocked")
        message = blocked["message"]
        assert (
            f"orders-broker-2 holds {MESSAGES} undrained messages ({TOPIC}: {MESSAGES})" in message
        )
        assert "orders-broker-0" not in message
        assert "orders-broker-1" not in message
        # Everything else is applied; the brokers stay.
        eventually(
            lambda: (
                'delay_levels = "1s 2s"'
                in core.read_namespaced_config_map("orders-broker-config", ns).data["broker.toml"]
            ),
            30,
            "ConfigMap updated",
        )
        assert replicas() == 3
        status = (resources.get("brokerclusters", "orders") or {})["status"]
        assert status["observedGeneration"] == 2

        consume_everything(pods, "GID_payments")
        eventually(lambda: replicas() == 2, 30, "StatefulSet scaled to 2")
        resources.wait_condition("brokerclusters", "orders", "True", "Running")
