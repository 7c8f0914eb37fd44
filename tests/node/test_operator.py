"""The operator as the chart runs it: ``helm install`` on the node, two replicas from the image
built from operator/Dockerfile, in a namespace enforcing the restricted Pod Security profile,
with Kopf peering."""

from __future__ import annotations

import datetime

import pytest

from .node import Node
from .support import (
    RELEASE,
    RELEASE_NAMESPACE,
    chart_app_version,
    describe,
    get,
    items,
    pod_ready,
    wait_for,
)
from .workloads import container_status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_operator_runs_as_the_charts_pods(installed: Node) -> None:
    node = installed
    deployment = get(node, "deployment", RELEASE, RELEASE_NAMESPACE)
    assert deployment is not None
    assert deployment["status"].get("readyReplicas") == 2, deployment["status"]
    pods = items(node, "pods", RELEASE_NAMESPACE, "app.kubernetes.io/name=reconsume")
    running = [pod for pod in pods if pod["status"]["phase"] == "Running" and pod_ready(pod)]
    assert len(running) == 2, describe(node)
    for pod in running:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == f"ghcr.io/reconsume/operator:{chart_app_version()}"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        # Ready through Kopf's liveness endpoint, as the kubelet's probes reach it.
        status = container_status(pod)
        assert status["ready"], status
        assert status["restartCount"] == 0, status
    # Peering: both replicas keep the ClusterKopfPeering alive; exactly one acts.
    peers = wait_for(
        lambda: (
            len(status := (get(node, "clusterkopfpeering", "reconsume") or {}).get("status") or {})
            == 2
            and status
        ),
        60,
        "two peers in ClusterKopfPeering reconsume",
        node,
    )
    # Identities are "<peering>@<pod>/<start>/<random>".
    priority = {
        identity.split("@", 1)[1].split("/", 1)[0]: peer["priority"]
        for identity, peer in peers.items()
    }
    assert set(priority) == {pod["metadata"]["name"] for pod in running}, priority
    lower, higher = sorted(priority, key=priority.__getitem__)
    logs = {name: node.kubectl("-n", RELEASE_NAMESPACE, "logs", name).stdout for name in priority}
    acting = peering_events(logs[higher])
    assert acting, logs[higher]
    assert acting[-1][0] == "Resuming", acting
    # The lower one acted at most for the moment before the other's first keep-alive arrived,
    # never for a peering lifetime (60 s), as both did after every install while the operator
    # did not wait for its peering object (docs/architecture.md, "Peering at start").
    events = peering_events(logs[lower])
    for index, (word, at) in enumerate(events):
        if word == "Resuming":
            assert index + 1 < len(events), events
            after, until = events[index + 1]
            assert after == "Pausing", events
            assert (until - at).total_seconds() < 10, events


def peering_events(log: str) -> list[tuple[str, datetime.datetime]]:
    """Kopf's "Resuming operations" and "Pausing operations" lines: the word and the time."""
    found = []
    for line in log.splitlines():
        for word in ("Resuming", "Pausing"):
            if f"] {word} operations" in line:
                stamp = line[1 : line.index("]")]
                found.append((word, datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")))
    return found
