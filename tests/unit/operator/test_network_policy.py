"""A BrokerCluster's NetworkPolicy (``spec.networkPolicy``): rendered only when enabled, for
the cluster's name-server and broker pods alone, with a rule per kind of traffic on the ports
the pods really serve; the peers' schema is networking.k8s.io/v1's; the operator knows its
own pods from its settings; a policy the spec no longer asks for is pruned."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import kubernetes.client
import pytest

from reconsume.topology.clusters import cluster_spec
from reconsume.topology.jobs import job_spec
from reconsume_operator.children import children
from reconsume_operator.config import OperatorConfig
from reconsume_operator.dead_letter_jobs import JOB_LABEL
from reconsume_operator.dead_letter_jobs import labels as run_labels
from reconsume_operator.kube import ChildWriter
from reconsume_operator.naming import network_policy_name
from reconsume_operator.network_policy import (
    ADMIN_PORTS,
    CLIENT_PORTS,
    METRICS_PORTS,
    network_policy,
    operator_peer,
)
from reconsume_operator.replicated import PRUNED, prune

from ..crds.schema import defaulted, load_crds, root_schema, walk

CRDS = load_crds()
APP = {"podSelector": {"matchLabels": {"app": "orders-app"}}}
OFFICE = {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.9.0/24"]}}
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
OPERATOR = operator_peer("reconsume-system", [("app.kubernetes.io/component", "controller")])


def resource(name: str = "orders", **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": name, "namespace": "shop", "uid": "u-1"},
        "spec": spec,
    }
    stored: dict[str, Any] = defaulted(root_schema(CRDS["BrokerCluster"]), body)
    return stored


def run_pod_labels(job: str) -> dict[str, str]:
    """The labels of a run's pod of the DeadLetterJob ``job``."""
    body = {
        "metadata": {"name": job, "namespace": "shop", "uid": "u-2", "generation": 1},
        "spec": {"consumerGroup": "orders-consumer", "action": "Purge"},
    }
    return run_labels(job_spec(body))


def policy_of(operator: Mapping[str, Any] | None = OPERATOR, **network: Any) -> dict[str, Any]:
    found = network_policy(cluster_spec(resource(networkPolicy=network), "img:1"), operator)
    assert found is not None
    return found


def ports(rule: Mapping[str, Any]) -> set[int] | None:
    if "ports" not in rule:
        return None
    assert {p["protocol"] for p in rule["ports"]} == {"TCP"}
    return {p["port"] for p in rule["ports"]}


def matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes' label-selector semantics (the operators the operator uses)."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for requirement in selector.get("matchExpressions", ()):
        key, operator = requirement["key"], requirement["operator"]
        if operator == "In" and labels.get(key) not in requirement["values"]:
            return False
        if operator == "Exists" and key not in labels:
            return False
    return True


def pod_labels(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The pod templates' labels, by the workload's name."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"]
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
    }


# ------------------------------------------------------------------ rendering
@pytest.mark.parametrize(
    "spec",
    [{}, {"networkPolicy": {}}, {"networkPolicy": {"enabled": False, "clients": [APP]}}],
    ids=["absent", "empty", "disabled"],
)
def test_no_policy_unless_enabled(spec: dict[str, Any]) -> None:
    objects = children(cluster_spec(resource(**spec), "img:1"), operator=OPERATOR)
    assert not [o for o in objects if o["kind"] == "NetworkPolicy"]


def test_an_external_cluster_gets_none() -> None:
    spec = cluster_spec(resource(external={"nameServer": "ns:9876"}), "img:1")
    assert network_policy(spec, OPERATOR) is None
    assert children(spec, operator=OPERATOR) == []


def test_the_policy_comes_first_and_is_named_after_the_cluster() -> None:
    objects = children(cluster_spec(resource(networkPolicy={"enabled": True}), "img:1"))
    first = objects[0]
    assert (first["apiVersion"], first["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    assert first["metadata"]["name"] == network_policy_name("orders") == "orders-network-policy"
    assert first["metadata"]["namespace"] == "shop"
    assert first["metadata"]["labels"]["app.kubernetes.io/instance"] == "orders"
    assert first["spec"]["policyTypes"] == ["Ingress"]


def test_every_kind_of_traffic_has_its_rule() -> None:
    spec = policy_of(enabled=True, clients=[APP, OFFICE], metricsFrom=[MONITORING])["spec"]
    clients, metrics, own, runs, operator = spec["ingress"]
    assert (clients["from"], ports(clients)) == ([APP, OFFICE], {9876, 10911, 10912, 8081, 8082})
    assert (metrics["from"], ports(metrics)) == ([MONITORING], {8080})
    assert own == {"from": [{"podSelector": spec["podSelector"]}]}  # every port
    assert ports(runs) == ports(operator) == {9876, 10911, 10912}
    (run_pods,) = runs["from"]
    assert run_pods == {
        "podSelector": {"matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}]}
    }
    assert operator["from"] == [
        {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": "reconsume-system"}
            },
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "controller"}},
        }
    ]


def test_empty_peer_lists_admit_any_source_and_an_unknown_operator_gets_no_rule() -> None:
    spec = policy_of(None, enabled=True)["spec"]
    clients, metrics, own, runs = spec["ingress"]
    assert "from" not in clients
    assert ports(clients) == {9876, 10911, 10912, 8081, 8082}
    assert "from" not in metrics
    assert ports(metrics) == {8080}
    assert ports(own) is None
    assert ports(runs) == {9876, 10911, 10912}


def test_the_peers_are_copies() -> None:
    body = resource(networkPolicy={"enabled": True, "clients": [APP]})
    spec = cluster_spec(body, "img:1")
    found = network_policy(spec)
    assert found is not None
    found["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app"] = "x"
    assert spec.network_clients[0]["podSelector"]["matchLabels"]["app"] == "orders-app"


@pytest.mark.parametrize("replicas", [1, 3])
def test_it_selects_the_name_servers_and_brokers_and_nothing_else(replicas: int) -> None:
    objects = children(
        cluster_spec(resource(replicas=replicas, networkPolicy={"enabled": True}), "img:1")
    )
    selector = objects[0]["spec"]["podSelector"]
    templates = pod_labels(objects)
    assert len(templates) == 1 + replicas
    assert all(matches(selector, labels) for labels in templates.values())
    # Not another cluster's pods, nor the runs of a DeadLetterJob named as the cluster.
    other = pod_labels(children(cluster_spec(resource("orders-eu"), "img:1")))
    assert not any(matches(selector, labels) for labels in other.values())
    run = run_pod_labels("orders")
    assert run[JOB_LABEL] == "orders"
    assert run["app.kubernetes.io/instance"] == "orders"
    assert not matches(selector, run)
    assert matches(objects[0]["spec"]["ingress"][3]["from"][0]["podSelector"], run)


def test_the_ports_are_the_ones_the_pods_serve() -> None:
    """A port added to the pods without a rule would be closed by the policy."""
    objects = children(cluster_spec(resource(networkPolicy={"enabled": True}, replicas=2), "img:1"))
    served = {
        port["containerPort"]
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
        for container in o["spec"]["template"]["spec"]["containers"]
        for port in container["ports"]
    }
    assert served == {*CLIENT_PORTS, *METRICS_PORTS}
    assert set(ADMIN_PORTS) < set(CLIENT_PORTS)


# ------------------------------------------------------------------ the peers' schema
def test_the_peer_schema_is_networking_v1s() -> None:
    nodes = dict(walk(root_schema(CRDS["BrokerCluster"])))
    models = {
        "": kubernetes.client.V1NetworkPolicyPeer,
        ".podSelector": kubernetes.client.V1LabelSelector,
        ".namespaceSelector": kubernetes.client.V1LabelSelector,
        ".podSelector.matchExpressions[*]": kubernetes.client.V1LabelSelectorRequirement,
        ".namespaceSelector.matchExpressions[*]": kubernetes.client.V1LabelSelectorRequirement,
        ".ipBlock": kubernetes.client.V1IPBlock,
    }
    for field in ("clients", "metricsFrom"):
        for suffix, model in models.items():
            node = nodes[f".spec.networkPolicy.{field}[*]{suffix}"]
            assert set(node["properties"]) == set(model.attribute_map.values()), suffix

    def bare(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: bare(v) for k, v in node.items() if k != "description"}
        return node

    clients = nodes[".spec.networkPolicy.clients"]
    assert bare(clients) == bare(nodes[".spec.networkPolicy.metricsFrom"])


# ------------------------------------------------------------------ the operator's pods
def test_the_operator_knows_its_pods_from_its_settings() -> None:
    config = OperatorConfig.from_env(
        {
            "RECONSUME_OPERATOR_NAMESPACE": "reconsume-system",
            "RECONSUME_OPERATOR_POD_LABELS": "app.kubernetes.io/name=reconsume, "
            "app.kubernetes.io/component=controller",
        }
    )
    assert config.pod_namespace == "reconsume-system"
    assert operator_peer(config.pod_namespace, config.pod_labels) == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "reconsume-system"}},
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "reconsume",
                "app.kubernetes.io/component": "controller",
            }
        },
    }
    unknown = OperatorConfig.from_env({})
    assert operator_peer(unknown.pod_namespace, unknown.pod_labels) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RECONSUME_OPERATOR_NAMESPACE": "ns"}, "set both or neither"),
        ({"RECONSUME_OPERATOR_POD_LABELS": "a=b"}, "set both or neither"),
        ({"RECONSUME_OPERATOR_NAMESPACE": "ns", "RECONSUME_OPERATOR_POD_LABELS": "a"}, "'a'"),
        (
            {"RECONSUME_OPERATOR_NAMESPACE": "ns", "RECONSUME_OPERATOR_POD_LABELS": "=b"},
            "without a key",
        ),
    ],
)
def test_half_an_identity_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OperatorConfig.from_env(env)


# ------------------------------------------------------------------ pruning
class Listing:
    """A writer holding one NetworkPolicy of the cluster, owned by ``owner``."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.deleted: list[tuple[str, str]] = []

    def list(self, api: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        if kind != "NetworkPolicy":
            return []
        assert "app.kubernetes.io/instance=orders" in selector
        metadata = {
            "name": "orders-network-policy",
            "uid": "np-1",
            "ownerReferences": [{"uid": self.owner}],
        }
        return [{"metadata": metadata}]

    def delete(self, api: str, kind: str, namespace: str, name: str, uid: str) -> bool:
        self.deleted.append((kind, name))
        return True


def test_a_policy_no_longer_asked_for_is_pruned() -> None:
    assert ("networking.k8s.io/v1", "NetworkPolicy") in PRUNED
    enabled = cluster_spec(resource(networkPolicy={"enabled": True}), "img:1")
    disabled = cluster_spec(resource(), "img:1")
    for spec, expected in ((enabled, []), (disabled, [("NetworkPolicy", "orders-network-policy")])):
        writer = Listing("u-1")
        gone = asyncio.run(prune(cast(ChildWriter, writer), spec, "u-1", children(spec)))
        assert writer.deleted == expected
        assert gone == [f"{k}/{n}" for k, n in expected]
    # One the cluster does not own (made by hand, say) is left alone.
    writer = Listing("someone-else")
    asyncio.run(prune(cast(ChildWriter, writer), disabled, "u-1", children(disabled)))
    assert writer.deleted == []
