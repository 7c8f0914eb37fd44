"""BrokerClusters: an operator-run one gets its child objects, owned by it; an external one
reports the brokers its name server knows."""

from __future__ import annotations

import kubernetes.client
from kopf.testing import KopfRunner

from ..integration.cluster import Cluster
from .operator_support import (
    Resources,
    brokers,
    crds,
    eventually,
    namespace,
    operator,
    resources,
)

__all__ = ["brokers", "crds", "namespace", "operator", "resources"]


def test_an_operator_run_cluster_creates_its_children(
    resources: Resources, api: kubernetes.client.ApiClient, operator: KopfRunner
) -> None:
    resources.create("brokerclusters", "orders", {"brokers": 3, "delayLevels": "1s 5s"})
    ns = resources.namespace
    apps = kubernetes.client.AppsV1Api(api)
    core = kubernetes.client.CoreV1Api(api)
    policy = kubernetes.client.PolicyV1Api(api)

    # The status is written once every child is applied (nothing runs pods here, so the name
    # server does not answer).
    resources.wait_condition("brokerclusters", "orders", "False", "NameServerUnreachable")
    sts = apps.read_namespaced_stateful_set("orders-broker", ns)
    assert sts.spec.replicas == 3
    owner = sts.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("BrokerCluster", "orders", True)
    deployment = apps.read_namespaced_deployment("orders-namesrv", ns)
    assert deployment.spec.replicas == 1
    assert core.read_namespaced_service("orders-broker", ns).spec.cluster_ip == "None"
    assert core.read_namespaced_service("orders-namesrv", ns).spec.ports[0].port == 9876
    config = core.read_namespaced_config_map("orders-broker-config", ns)
    assert 'delay_levels = "1s 5s"' in config.data["broker.toml"]
    assert policy.read_namespaced_pod_disruption_budget("orders-broker", ns).spec.max_unavailable

    status = (resources.get("brokerclusters", "orders") or {})["status"]
    assert status["phase"] == "Pending"
    assert status["nameServer"] == f"orders-namesrv.{ns}.svc:9876"

    resources.patch("brokerclusters", "orders", {"spec": {"brokers": 4}})
    eventually(lambda: apps.read_namespaced_stateful_set("orders-broker", ns).spec.replicas == 4)


def test_an_external_cluster_reports_its_brokers(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    resources.create(
        "brokerclusters", "legacy", {"external": {"nameServer": brokers.namesrv.address}}
    )
    resources.wait_condition("brokerclusters", "legacy", "True", "Running")
    status = (resources.get("brokerclusters", "legacy") or {})["status"]
    assert status["phase"] == "Running"
    assert {b["name"]: b["ready"] for b in status["brokers"]} == {
        "broker-a": True,
        "broker-b": True,
    }
