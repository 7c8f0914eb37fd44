"""Replicated brokers on a real node: a running broker gains a replica (``replicas: 2``): its
pod restarts into the election and the new replica copies its log; SIGKILL of the master's
process hands the broker to its replica with every acknowledged message, the killed pod
rejoins as a replica, and a settings change rolls replica first and master last, writes
pausing only for the hand-over (both pauses are printed and bounded)."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.model import Message

from .node import Node
from .support import DEMO_NAMESPACE, get, items, name_server, ready, wait_for
from .test_brokers import read_topic
from .workloads import secret_credentials, sign_as

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER, TOPIC = "ha", "lifecycle"
"""The cluster of these tests; the topic has the name :func:`read_topic` reads."""
BROKER = f"{CLUSTER}-broker-0"
REPLICA = f"{CLUSTER}-broker-r1-0"
FAILOVER_BOUND_S = 20.0
HAND_OVER_BOUND_S = 10.0


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
