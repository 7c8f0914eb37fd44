"""RocketMQ 5's clients on the node, as an application outside the cluster meets them: through
the BrokerCluster's ``<cluster>-grpc`` Service (its ``status.grpcEndpoint``), signing with a
User's generated key. Apache RocketMQ's Python client 5.x sends, its Java client 5.x receives
through routes that name each broker pod's own gRPC endpoint; a message left unacknowledged
comes back from the pod's retry engine with its attempt counted, and the brokers' metrics count
what the pop consumers did."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from tests.compat.client5_support import ensure_java5_built, run_client5

from .node import Node
from .support import (
    DEMO_NAMESPACE,
    broker_http_addresses,
    get,
    metric_sum,
    name_server,
    ready,
    run,
    wait_for,
)
from .workloads import CLUSTER, secret_credentials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "orders-v5"
GROUP_RESOURCE = "orders-v5-consumer"
GROUP = "GID_orders_v5"
USER = "orders-app"
COUNT = 8


@pytest.fixture
def java5(examples: Node) -> None:
    reason = ensure_java5_built()
    if reason is not None:
        pytest.fail(f"the 5.x Java driver cannot run: {reason}")


def apply_resources(node: Node) -> None:
    """A Topic and a ConsumerGroup naming the examples' User as their producer and consumer."""
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": TOPIC, "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "queues": 2, "producers": [USER], "consumers": [USER]},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "ConsumerGroup",
                "metadata": {"name": GROUP_RESOURCE, "namespace": DEMO_NAMESPACE},
                "spec": {
                    "cluster": CLUSTER,
                    "groupName": GROUP,
                    "retry": {"maxTimes": 3},
                    "subscriptions": [{"topic": TOPIC}],
                    "consumers": [USER],
                },
            },
        ]
    )
    for kind, name in (("topic", TOPIC), ("consumergroup", GROUP_RESOURCE), ("user", USER)):

        def is_ready(kind: str = kind, name: str = name) -> bool:
            return ready(get(node, kind, name, DEMO_NAMESPACE))

        wait_for(is_ready, 120, f"{kind} {name} Ready", node)
    acl = get(node, "secret", f"{CLUSTER}-acl", DEMO_NAMESPACE) or {}
    digest = acl["metadata"]["annotations"]["reconsume.io/acl-digest"]

    async def enforced() -> set[str]:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            return {
                (await admin.broker_api.runtime_info(address)).get("aclDigest", "")
                for broker in await admin.brokers(CLUSTER)
                for address in broker.addresses.values()
            }

    # The grants reach the pods through the kubelet's refresh of the mounted ACL Secret.
    wait_for(lambda: run(enforced()) == {digest}, 120, f"every broker enforcing ACL {digest}", node)


def grpc_endpoint(node: Node) -> str:
    """The Service the BrokerCluster's status names, as this machine reaches it (its cluster
    IP: the machine does not resolve the cluster's DNS names)."""
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE) or {}
    endpoint = (cluster.get("status") or {}).get("grpcEndpoint")
    assert endpoint == f"{CLUSTER}-grpc.{DEMO_NAMESPACE}.svc:8081", cluster.get("status")
    service = get(node, "service", f"{CLUSTER}-grpc", DEMO_NAMESPACE)
    assert service is not None
    return f"{service['spec']['clusterIP']}:8081"


def test_5x_clients_send_and_consume_through_the_clusters_grpc_service(
    examples: Node, java5: None, tmp_path: Path
) -> None:
    node = examples
    apply_resources(node)
    endpoint = grpc_endpoint(node)
    key = secret_credentials(node, USER)
    sent = run_client5(
        "python", "send", endpoint, tmp_path / "send", topic=TOPIC, count=COUNT, prefix="v5",
        access_key=key.access_key, secret_key=key.secret_key,
    )["sent"]  # fmt: skip
    assert len({s["messageId"] for s in sent}) == COUNT
    # Routes name each pod's own endpoint: the messages are on both brokers' queues.
    assert len({s["brokerName"] for s in sent}) == 2, sent

    consumed = run_client5(
        "java", "simple-consume", endpoint, tmp_path / "consume", 90.0, topic=TOPIC,
        group=GROUP, count=COUNT, prefix="v5", fail_first=True, invisible_ms=2000,
        access_key=key.access_key, secret_key=key.secret_key,
    )  # fmt: skip
    deliveries: dict[str, list[int]] = defaultdict(list)
    for event in consumed["received"]:
        deliveries[str(event["messageId"])].append(int(str(event["deliveryAttempt"])))
    assert dict(deliveries) == {s["messageId"]: [1, 2] for s in sent}, consumed.explain()
    assert len(consumed["acked"]) == COUNT

    brokers = broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER)
    for kind, at_least in (("received", 2 * COUNT), ("expired", COUNT), ("acked", COUNT)):

        def counted(kind: str = kind, at_least: int = at_least) -> float:
            n = metric_sum(brokers, "reconsume_pop_messages_total", group=GROUP, event=kind)
            return n if n >= at_least else 0.0

        found = wait_for(
            counted, 30, f"reconsume_pop_messages_total{{event={kind}}} >= {at_least}", node
        )
        print(f"{kind}: {found:.0f}")

    # A wrong secret is refused by the pods' ACL (UNAUTHORIZED) and nothing is stored.
    refused_before = metric_sum(
        brokers, "reconsume_acl_refused_requests_total", reason="bad_signature"
    )
    forged = run_client5(
        "python", "send", endpoint, tmp_path / "forged", 30.0, topic=TOPIC, count=1,
        prefix="forged", check=False, access_key=key.access_key,
        secret_key="not-the-secret-key",
    )  # fmt: skip
    assert not forged["sent"], forged.explain()
    refused = metric_sum(brokers, "reconsume_acl_refused_requests_total", reason="bad_signature")
    assert refused > refused_before, (refused_before, refused)
