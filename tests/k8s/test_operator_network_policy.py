"""A BrokerCluster's ``spec.networkPolicy`` against a real API server: the operator creates
the NetworkPolicy with the ports and peers of the spec, owned by the cluster, restores it when
it is changed by hand, and deletes it when the spec turns it off; and what the Helm chart
grants the operator on NetworkPolicies (``RBAC_VERBS``) is all that takes. Nothing enforces
NetworkPolicies here (no network plugin runs): what they admit is not tested."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException

from reconsume_operator.kube import ChildWriter, KubeError
from reconsume_operator.network_policy import RBAC_VERBS

from .control_plane import ControlPlane
from .operator_support import Resources, crds, eventually, namespace, resources, running_operator

__all__ = ["crds", "namespace", "resources"]

OPERATOR_NAMESPACE = "reconsume-system"
OPERATOR_LABELS = {
    "app.kubernetes.io/name": "reconsume",
    "app.kubernetes.io/component": "controller",
}
POLICY = "orders-network-policy"
APP = {"podSelector": {"matchLabels": {"app": "orders-app"}}}
OFFICE = {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.9.0/24"]}}
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


@pytest.fixture
def operator(namespace: str, control_plane: ControlPlane) -> Iterator[KopfRunner]:
    pods = (OPERATOR_NAMESPACE, OPERATOR_LABELS)
    with running_operator(namespace, control_plane, pods=pods) as runner:
        yield runner


def read_policy(api: kubernetes.client.ApiClient, ns: str) -> dict[str, Any] | None:
    """The policy as the API server returns it (camelCase, defaults filled in)."""
    networking = kubernetes.client.NetworkingV1Api(api)
    try:
        found = networking.read_namespaced_network_policy(POLICY, ns)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    body: dict[str, Any] = api.sanitize_for_serialization(found)
    return body


def rules(api: kubernetes.client.ApiClient, ns: str) -> list[dict[str, Any]] | None:
    """The policy's ingress rules (None: no policy)."""
    policy = read_policy(api, ns)
    return None if policy is None else list(policy["spec"].get("ingress") or [])


def ports(rule: dict[str, Any]) -> list[tuple[str, int]] | None:
    if "ports" not in rule:
        return None
    return [(port["protocol"], port["port"]) for port in rule["ports"]]


def test_the_operator_keeps_the_network_policy_of_the_spec(
    resources: Resources, api: kubernetes.client.ApiClient, operator: KopfRunner
) -> None:
    ns = resources.namespace
    apps = kubernetes.client.AppsV1Api(api)
    resources.create("brokerclusters", "orders", {"brokers": 1})
    resources.wait_condition("brokerclusters", "orders", "False", "NameServerUnreachable")
    assert apps.read_namespaced_stateful_set("orders-broker", ns)
    assert read_policy(api, ns) is None  # not asked for

    network = {"enabled": True, "clients": [APP, OFFICE], "metricsFrom": [MONITORING]}
    resources.patch("brokerclusters", "orders", {"spec": {"networkPolicy": network}})
    policy = eventually(lambda: read_policy(api, ns), 30, f"NetworkPolicy {POLICY}")
    (owner,) = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("BrokerCluster", "orders", True)
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "orders"
    clients, metrics, own, runs, operator_rule = spec["ingress"]
    assert clients["from"] == [APP, OFFICE]
    assert ports(clients) == [
        ("TCP", 9876), ("TCP", 10911), ("TCP", 10912), ("TCP", 8081), ("TCP", 8082)
    ]  # fmt: skip
    assert (metrics["from"], ports(metrics)) == ([MONITORING], [("TCP", 8080)])
    assert own == {"from": [{"podSelector": spec["podSelector"]}]}
    assert ports(runs) == ports(operator_rule) == [("TCP", 9876), ("TCP", 10911), ("TCP", 10912)]
    assert operator_rule["from"] == [
        {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}
            },
            "podSelector": {"matchLabels": OPERATOR_LABELS},
        }
    ]
    # Every pod of the cluster is behind it.
    template = apps.read_namespaced_stateful_set("orders-broker", ns).spec.template.metadata
    assert spec["podSelector"]["matchLabels"].items() <= template.labels.items()

    # Rules changed by hand are restored by the next drift pass.
    networking = kubernetes.client.NetworkingV1Api(api)
    networking.patch_namespaced_network_policy(POLICY, ns, {"spec": {"ingress": [{}]}})
    eventually(lambda: rules(api, ns) == spec["ingress"], 30, "the rules restored")

    # Any source, once clients is empty.
    resources.patch("brokerclusters", "orders", {"spec": {"networkPolicy": {"clients": None}}})
    eventually(lambda: "from" not in (rules(api, ns) or [{"from": []}])[0], 30, "any client")

    resources.patch("brokerclusters", "orders", {"spec": {"networkPolicy": {"enabled": False}}})
    eventually(lambda: read_policy(api, ns) is None, 30, f"NetworkPolicy {POLICY} deleted")
    eventually(
        lambda: any(POLICY in m for m in resources.events("Deleted", "orders")),
        30,
        "a Deleted event naming the policy",
    )
    assert apps.read_namespaced_stateful_set("orders-broker", ns)  # the rest stays


def token_configuration(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, ns: str, verbs: list[str]
) -> kubernetes.client.Configuration:
    """Credentials of a ServiceAccount that may do ``verbs`` on NetworkPolicies in ``ns`` and
    nothing else."""
    name = f"np-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    rule = {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": verbs}
    rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": [rule]})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )
    request = {"spec": {"audiences": [f"{control_plane.server}/"], "expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token(name, ns, request).status.token
    configuration = kubernetes.client.Configuration()
    configuration.host = control_plane.server
    configuration.ssl_ca_cert = str(control_plane.credentials.ca_cert)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return configuration


def test_the_verbs_the_chart_grants_suffice(
    namespace: str, api: kubernetes.client.ApiClient, control_plane: ControlPlane
) -> None:
    """Server-side apply creating and then changing the policy, and the pruning's list and
    delete, with exactly :data:`RBAC_VERBS` (no get)."""
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": POLICY,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/instance": "orders"},
        },
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]},
    }
    writer = ChildWriter(token_configuration(api, control_plane, namespace, list(RBAC_VERBS)))

    def allowed() -> bool:
        try:
            writer.list("networking.k8s.io/v1", "NetworkPolicy", namespace, "a=b")
        except KubeError:
            return False  # the RoleBinding is not in force yet
        return True

    try:
        eventually(allowed, 30, "the Role in force")
        writer.apply(policy)
        writer.apply({**policy, "spec": {**policy["spec"], "ingress": []}})
        (found,) = writer.list(
            "networking.k8s.io/v1", "NetworkPolicy", namespace, "app.kubernetes.io/instance=orders"
        )
        assert found["spec"].get("ingress") in (None, [])
        uid = found["metadata"]["uid"]
        assert writer.delete("networking.k8s.io/v1", "NetworkPolicy", namespace, POLICY, uid)
        assert read_policy(api, namespace) is None
    finally:
        writer.close()
