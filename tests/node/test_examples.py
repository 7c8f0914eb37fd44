"""``kubectl apply -f examples/`` on the node: the BrokerCluster's name server and brokers as
pods from the image built from broker_image/Dockerfile, each broker on a volume of the default
StorageClass, and the examples' ConsumerGroup and Topic Ready through the operator."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient

from .node import Node
from .support import DEMO_NAMESPACE, chart_app_version, get, items, name_server, ready, run
from .workloads import CLUSTER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_examples_run_brokers_on_their_volumes(examples: Node) -> None:
    node = examples
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)
    assert cluster is not None
    assert ready(cluster), cluster
    pods = items(node, "pods", DEMO_NAMESPACE, f"app.kubernetes.io/instance={CLUSTER}")
    images = {c["image"] for pod in pods for c in pod["spec"]["containers"]}
    assert images == {f"ghcr.io/reconsume/reconsume:{chart_app_version()}"}
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    brokers = sorted(name for name in by_name if name.startswith(f"{CLUSTER}-broker-"))
    assert brokers == ["orders-broker-0", "orders-broker-1"]
    registered = {b["name"]: b["address"] for b in cluster["status"]["brokers"]}
    for name in brokers:
        assert registered[name] == f"{by_name[name]['status']['podIP']}:10911"
    # Each broker's store is its own volume claim, bound to a local volume of the default
    # class; the kubelet made it writable for the pods' fsGroup, and the broker wrote there.
    for name in brokers:
        claim = get(node, "pvc", f"store-{name}", DEMO_NAMESPACE)
        assert claim is not None
        assert claim["status"]["phase"] == "Bound", claim
        volume = get(node, "pv", claim["spec"]["volumeName"])
        assert volume is not None
        path = Path(volume["spec"]["local"]["path"])
        assert path.parent == node.layout.volumes
        assert path.stat().st_gid == 10001, oct(path.stat().st_mode)
        assert (path / "commitlog").is_dir(), sorted(p.name for p in path.iterdir())
    for kind, name in (("consumergroup", "orders-consumer"), ("topic", "orders")):
        assert ready(get(node, kind, name, DEMO_NAMESPACE)), name
    # `kubectl get reconsume` shows each group's retry and dead-letter depths.
    lines = node.kubectl("-n", DEMO_NAMESPACE, "get", "reconsume").stdout.splitlines()
    header = next(line for line in lines if line.startswith("NAME") and "DLQ" in line)
    assert header.split()[:6] == ["NAME", "GROUP", "CLUSTER", "READY", "RETRY", "DLQ"], lines
    orders = next(line for line in lines if line.startswith("consumergroup.reconsume.io/orders-"))
    assert orders.split()[3:6] == ["True", "0", "0"], lines

    # The name server the machine reaches through its Service knows both brokers.
    async def brokers_of_the_name_server() -> set[str]:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            return {broker.name for broker in await admin.brokers(CLUSTER)}

    assert run(brokers_of_the_name_server()) == set(brokers)
