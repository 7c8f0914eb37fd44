"""Replicated brokers on a real node: a running broker gains a replica (``replicas: 2``): its
pod restarts into the election and the new replica copies its log; SIGKILL of the master's
process hands the broker to its replica with every acknowledged message, the killed pod
rejoins as a replica, and a settings change rolls replica first and master last, writes
pausing only for the hand-over (both pauses are printed and bounded). Apache RocketMQ's Java
clients 4.9.8 and 5.x, refreshing their routes only every 30 s, send on through a SIGKILL of
the master by the broker's master Service."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.ids import parse_offset_msg_id
from reconsume.message.model import Message

from ..compat.client5_support import client5_command, client5_log, ensure_java5_built
from ..compat.conftest import JavaClient
from ..compat.driver_support import BackgroundDriver, scenario_args
from ..compat.java_client_support import client_log
from .node import Node
from .support import DEMO_NAMESPACE, get, items, name_server, ready, run, wait_for
from .test_brokers import read_topic
from .workloads import driver_credentials, secret_credentials, sign_as

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER, TOPIC = "ha", "lifecycle"
"""The cluster of these tests; the topic has the name :func:`read_topic` reads."""
BROKER = f"{CLUSTER}-broker-0"
REPLICA = f"{CLUSTER}-broker-r1-0"
MASTER_SERVICE = f"{BROKER}-master"
FAILOVER_BOUND_S = 20.0
HAND_OVER_BOUND_S = 10.0
JAVA_FAILOVER_BOUND_S = 15.0
"""Half the Java producer's route refresh: without the master Service it waits for that."""
JAVA_COUNT = 600
JAVA_TIMEOUT_S = 240.0


@dataclass
class Sender:
    """Sends numbered messages through the name server until stopped, in its own thread;
    records when each acknowledged send was acknowledged."""

    name_server: str
    acked: dict[str, float] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    """When each acknowledged send began."""
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        asyncio.run(self._send())

    async def _send(self) -> None:
        async with Producer([self.name_server], send_timeout_s=2.0) as producer:
            index = 0
            while not self.stop.is_set():
                body = f"ha-{index}"
                began = time.monotonic()
                try:
                    await producer.send(Message(TOPIC, body.encode()))
                except ReconsumeError:
                    self.failures += 1
                    await asyncio.sleep(0.05)
                    continue
                self.acked[body] = time.monotonic()
                self.started[body] = began
                index += 1
                await asyncio.sleep(0.01)

    def first_ack_after(self, moment: float) -> float:
        """When the first send begun after ``moment`` was acknowledged (0: none yet)."""
        started = dict(self.started)
        later = [at for body, at in list(self.acked.items()) if started.get(body, 0) > moment]
        return min(later) if later else 0.0

    def longest_gap(self, start: float, end: float) -> float:
        times = [start, *sorted(at for at in list(self.acked.values()) if start < at <= end)]
        return max((b - a for a, b in itertools.pairwise(times)), default=end - start)


def broker_entry(node: Node) -> dict[str, Any]:
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE) or {}
    found = (cluster.get("status") or {}).get("brokers") or [{}]
    entry: dict[str, Any] = found[0]
    return entry


def in_sync(node: Node, master: str, replica: str) -> bool:
    entry = broker_entry(node)
    return entry.get("master") == master and entry.get("inSync") == [replica]


def settled(node: Node) -> tuple[str, str] | None:
    """(master pod, replica pod) once the broker has a master and its replica is in sync."""
    for master, replica in ((BROKER, REPLICA), (REPLICA, BROKER)):
        if in_sync(node, master, replica):
            return master, replica
    return None


def kill_broker_process(pod: str) -> float:
    """SIGKILL the broker process of pod ``pod`` of broker 0 (its container restarts); when
    the signal was sent."""
    replica = 0 if pod == BROKER else 1
    pattern = f"--broker-name {BROKER} --broker-id {replica} "
    found = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True)
    pids = found.stdout.split()
    assert len(pids) == 1, f"processes matching {pattern!r}: {pids}"
    subprocess.run(["kill", "-KILL", pids[0]], check=True)
    return time.monotonic()


def pods_updated(node: Node) -> bool:
    """Every broker pod of the cluster runs its StatefulSet's latest template and is Ready."""
    selector = f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/component=broker"
    sets = {
        s["metadata"]["name"]: s["status"].get("updateRevision")
        for s in items(node, "statefulsets", DEMO_NAMESPACE, selector)
    }
    pods = items(node, "pods", DEMO_NAMESPACE, selector)
    return len(pods) == 2 and all(
        pod["metadata"]["labels"].get("controller-revision-hash")
        == sets.get(pod["metadata"]["ownerReferences"][0]["name"])
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod["status"].get("conditions") or []
        )
        and not pod["metadata"].get("deletionTimestamp")
        for pod in pods
    )


def test_a_replicated_broker_fails_over_and_rolls_without_losing_a_message(
    examples: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = examples
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": CLUSTER, "namespace": DEMO_NAMESPACE},
                "spec": {"brokers": 1, "flush": "Sync", "nameServers": 1},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": f"{CLUSTER}-{TOPIC}", "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "topicName": TOPIC, "queues": 2},
            },
        ]
    )
    wait_for(
        lambda: ready(get(node, "topic", f"{CLUSTER}-{TOPIC}", DEMO_NAMESPACE)),
        300,
        "the cluster and its topic Ready",
        node,
    )
    # Access control is on (the default): the replicas replicate, and the test signs, with the
    # admin account the operator generated for the cluster.
    sign_as(monkeypatch, secret_credentials(node, f"{CLUSTER}-admin"))
    header = node.kubectl("-n", DEMO_NAMESPACE, "get", "rbc", CLUSTER).stdout.splitlines()[0]
    assert "MASTERS" in header.split()

    sender = Sender(name_server(node, DEMO_NAMESPACE, CLUSTER))
    thread = threading.Thread(target=sender.run, name="ha-sender")
    thread.start()
    try:
        wait_for(lambda: len(sender.acked) >= 50, 60, "sends acknowledged", node)
        # The running broker gains a replica: its pod restarts into the election first, then
        # the replica starts empty and copies its log.
        node.kubectl(
            "-n", DEMO_NAMESPACE, "patch", "brokercluster", CLUSTER, "--type=merge",
            "-p", '{"spec": {"replicas": 2}}',
        )  # fmt: skip
        wait_for(lambda: in_sync(node, BROKER, REPLICA), 300, "the replica in sync", node)

        # The master's process is killed: its replica takes over.
        master, replica = wait_for(lambda: settled(node), 60, "a master", node)
        refused = sender.failures
        killed_at = kill_broker_process(master)
        wait_for(lambda: sender.first_ack_after(killed_at), 60, "a send after the kill", node)
        failover_s = sender.first_ack_after(killed_at) - killed_at
        print(
            f"failover: first acknowledged send {failover_s:.2f} s after the SIGKILL; "
            f"{sender.failures - refused} sends refused or timed out meanwhile"
        )
        assert failover_s < FAILOVER_BOUND_S
        wait_for(lambda: in_sync(node, replica, master), 180, "the killed pod rejoins", node)
        epoch = broker_entry(node)["epoch"]

        # A settings change rolls the pods: the replica (the old master's pod), then the
        # master, which hands over.
        started = time.monotonic()
        node.kubectl(
            "-n", DEMO_NAMESPACE, "patch", "brokercluster", CLUSTER, "--type=merge",
            "-p", '{"spec": {"retentionHours": 48}}',
        )  # fmt: skip
        wait_for(
            lambda: pods_updated(node) and broker_entry(node).get("epoch", 0) > epoch,
            300,
            "both pods restarted, the master handed over",
            node,
        )
        wait_for(lambda: settled(node), 180, "in sync after the roll", node)
        ended = time.monotonic()
        pause_s = sender.longest_gap(started, ended)
        print(f"rolling update: {ended - started:.1f} s, longest pause in sends {pause_s:.2f} s")
        assert pause_s < HAND_OVER_BOUND_S
        events = node.kubectl(
            "-n", DEMO_NAMESPACE, "get", "events", "--field-selector",
            f"involvedObject.name={CLUSTER},reason=RestartingBroker", "-o",
            "jsonpath={range .items[*]}{.message}{'\\n'}{end}",
        ).stdout  # fmt: skip
        # The killed pod, a replica since, first; then the master, handing over.
        assert f"restarting pod {master} (a replica)" in events
        assert f"restarting pod {replica} (its master, which hands over)" in events
    finally:
        sender.stop.set()
        thread.join(timeout=30)

    master = broker_entry(node)["address"]
    stored = {message.body.decode() for message in read_topic(master)}
    lost = set(sender.acked) - stored
    print(f"{len(sender.acked)} acknowledged sends, {sender.failures} refused or timed out")
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"


def master_service_address(node: Node) -> str:
    service = get(node, "service", MASTER_SERVICE, DEMO_NAMESPACE)
    assert service is not None, f"no Service {MASTER_SERVICE}"
    assert "selector" not in service["spec"]
    return f"{service['spec']['clusterIP']}:10911"


def slice_endpoint(node: Node, port: str = "broker") -> str | None:
    """``ip:port`` the master Service's EndpointSlice leads to for its port named ``port``
    (None: nowhere yet)."""
    found = get(node, "endpointslice", MASTER_SERVICE, DEMO_NAMESPACE) or {}
    endpoints = found.get("endpoints") or []
    ports = {p["name"]: p["port"] for p in found.get("ports") or []}
    if len(endpoints) != 1 or port not in ports:
        return None
    return f"{endpoints[0]['addresses'][0]}:{ports[port]}"


def pod_ip(node: Node, pod: str) -> str:
    found = get(node, "pod", pod, DEMO_NAMESPACE)
    assert found is not None, f"no pod {pod}"
    return str(found["status"]["podIP"])


def apply_replicated(node: Node) -> tuple[str, str]:
    """The replicated cluster of the master Service tests and its topic; (master pod, replica
    pod) once settled."""
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": CLUSTER, "namespace": DEMO_NAMESPACE},
                "spec": {"brokers": 1, "flush": "Sync", "nameServers": 1, "replicas": 2,
                         "retentionHours": 48},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": f"{CLUSTER}-{TOPIC}", "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "topicName": TOPIC, "queues": 2},
            },
        ]
    )  # fmt: skip
    settled_pods: tuple[str, str] = wait_for(
        lambda: settled(node), 300, "a master and its replica", node
    )
    return settled_pods


def test_the_java_client_with_its_default_route_refresh_follows_the_master_service(
    examples: Node, java_client: JavaClient, tmp_path: Path
) -> None:
    """Apache RocketMQ's Java client 4.9.8 with its producer's default 30 s route refresh,
    through a SIGKILL of the master: routes name the broker's master Service (a cluster IP,
    not a pod), whose EndpointSlice the master points at its own master port. When the master
    changes the client's connection breaks, it connects again to the same address and reaches
    the new master: it sends on within a bound well below its route refresh, and every
    message it had acknowledged is consumed."""
    node = examples
    master, replica = apply_replicated(node)
    service = master_service_address(node)
    wait_for(
        lambda: (
            slice_endpoint(node) == f"{pod_ip(node, master)}:10912"
            and broker_entry(node).get("address") == service
        ),
        60,
        "the master Service leading to the master, registered",
        node,
    )

    command = java_client.command(
        "failover",
        *scenario_args(
            name_server(node, DEMO_NAMESPACE, CLUSTER),
            JAVA_TIMEOUT_S,
            {
                "topic": TOPIC, "group": "GID_ha_java", "count": JAVA_COUNT, "queues": 2,
                "pause-ms": 20, "poll-ms": 30_000,
                **driver_credentials(secret_credentials(node, f"{CLUSTER}-admin")),
            },
        ),
        state_dir=tmp_path / "java",
    )  # fmt: skip
    with BackgroundDriver(command) as driver:
        wait_for(lambda: len(driver.of("sent")) >= 100, 120, "100 sends of the Java client", node)
        kill_broker_process(master)
        # after the signal: a send begun while the process was looked for was still answered
        killed_at_ms = time.time() * 1000
        driver.finish(JAVA_TIMEOUT_S, lambda: client_log(tmp_path / "java"))
    # the driver checked that every message it had acknowledged was consumed
    acked = driver.of("sent")
    assert len(acked) == JAVA_COUNT
    after = [e for e in acked if e["sentAt"] > killed_at_ms]
    assert after, "nothing sent after the kill"
    resumed_s = (after[0]["ackedAt"] - killed_at_ms) / 1000
    failed = len(driver.of("sendFailed")) + len(driver.of("sendNotOk"))
    print(
        f"Java client, 30 s route refresh: first send acknowledged {resumed_s:.2f} s after "
        f"the SIGKILL ({failed} sends failed meanwhile)"
    )
    assert resumed_s < JAVA_FAILOVER_BOUND_S
    # The new master took the Service over; the client's last sends are stored on it.
    wait_for(lambda: settled(node) == (replica, master), 180, "the killed pod rejoins", node)
    new_ip = pod_ip(node, replica)
    assert slice_endpoint(node) == f"{new_ip}:10912"
    assert broker_entry(node)["address"] == service
    hosts = {str(parse_offset_msg_id(e["offsetMsgId"])[0]) for e in after[-10:]}
    assert hosts == {f"{new_ip}:10911"}


def grpc_address_of(node: Node, remoting: str) -> str:
    """The gRPC address the broker at ``remoting`` gives in its runtime info (the one the
    brokers' routes name it by)."""

    async def ask() -> str:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            info = await admin.broker_api.runtime_info(remoting)
            return str(info.get("grpcAddress", ""))

    return run(ask())


def test_the_5x_java_client_follows_the_master_service_through_a_sigkill(
    examples: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Apache RocketMQ's Java client 5.x, whose routes (QueryRoute, refreshed every 30 s) name
    each broker's gRPC endpoint: the master gives its master Service's port 8081, whose
    EndpointSlice it points at its own gRPC master port. Through a SIGKILL of the master the
    client's connection breaks, it connects again to the same address and reaches the new
    master: it sends on within a bound well below its route refresh, and every message it
    had acknowledged is on the new master."""
    reason = ensure_java5_built()
    if reason is not None:
        pytest.fail(f"the 5.x Java driver cannot run: {reason}")
    node = examples
    master, replica = apply_replicated(node)
    key = sign_as(monkeypatch, secret_credentials(node, f"{CLUSTER}-admin"))
    service_ip = master_service_address(node).rpartition(":")[0]
    stable = f"{service_ip}:8081"
    wait_for(
        lambda: (
            slice_endpoint(node, "grpc") == f"{pod_ip(node, master)}:8082"
            and grpc_address_of(node, master_service_address(node)) == stable
        ),
        60,
        "the master giving its master Service's gRPC address",
        node,
    )
    entry = get(node, "service", f"{CLUSTER}-grpc", DEMO_NAMESPACE)
    assert entry is not None
    command, env = client5_command(
        "java", "send", f"{entry['spec']['clusterIP']}:8081", tmp_path / "java5",
        JAVA_TIMEOUT_S, topic=TOPIC, count=JAVA_COUNT, prefix="v5", pause_ms=20,
        keep_going=True, access_key=key.access_key, secret_key=key.secret_key,
    )  # fmt: skip
    with BackgroundDriver(command, env) as driver:
        wait_for(lambda: len(driver.of("sent")) >= 100, 120, "100 sends of the 5.x client", node)
        kill_broker_process(master)
        # after the signal: a send begun while the process was looked for was still answered
        killed_at_ms = time.time() * 1000
        driver.finish(JAVA_TIMEOUT_S, lambda: client5_log("java", tmp_path / "java5"))
    acked = driver.of("sent")
    assert len(acked) == JAVA_COUNT
    after = [e for e in acked if e["sentAt"] > killed_at_ms]
    assert after, "nothing sent after the kill"
    resumed_s = (after[0]["ackedAt"] - killed_at_ms) / 1000
    failed = len(driver.of("sendFailed"))
    print(
        f"Java client 5.x, 30 s route refresh: first send acknowledged {resumed_s:.2f} s after "
        f"the SIGKILL ({failed} sends failed after the client's own attempts meanwhile)"
    )
    assert resumed_s < JAVA_FAILOVER_BOUND_S
    wait_for(lambda: settled(node) == (replica, master), 180, "the killed pod rejoins", node)
    assert slice_endpoint(node, "grpc") == f"{pod_ip(node, replica)}:8082"
    assert grpc_address_of(node, master_service_address(node)) == stable
    # every acknowledged message is on the new master, which holds the killed one's log
    stored = {message.body.decode() for message in read_topic(broker_entry(node)["address"])}
    lost = {str(e["body"]) for e in acked} - stored
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"
