"""The BrokerCluster CRD's ``spec.networkPolicy``, checked by embedded mode's validator as the
API server checks it (tests/k8s/test_apiserver_validation.py compares the two): peers in the
shape of networking.k8s.io/v1 NetworkPolicyPeer, refused with the field named when a
NetworkPolicy could not hold them, and no policy on an external cluster."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.apiserver.validation import check
from reconsume.topology.clusters import cluster_spec

from .schema import defaulted, load_crds, root_schema, walk

CRDS = load_crds()
NODES = dict(walk(root_schema(CRDS["BrokerCluster"])))
CIDR = NODES[".spec.networkPolicy.clients[*].ipBlock.cidr"]["pattern"]


def cluster(**network: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "orders"},
        "spec": {"networkPolicy": {"enabled": True, **network}},
    }


def expressions(*requirement: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(requirement)}


def paths(document: dict[str, Any]) -> list[str]:
    return [p.path for p in check(document)]


SELECTOR = {
    "matchLabels": {"app.kubernetes.io/name": "orders-app", "tier": ""},
    "matchExpressions": [
        {"key": "example.com/team", "operator": "NotIn", "values": ["a", "b-c.d_e"]},
        {"key": "canary", "operator": "DoesNotExist"},
    ],
}


@pytest.mark.parametrize(
    "network",
    [
        {},
        {"clients": [], "metricsFrom": []},
        {"clients": [{"podSelector": {}}, {"namespaceSelector": {}}]},
        {"clients": [{"podSelector": SELECTOR, "namespaceSelector": SELECTOR}]},
        {"clients": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]},
        {"metricsFrom": [{"ipBlock": {"cidr": "2001:db8::/32"}}, {"podSelector": SELECTOR}]},
        {"clients": [{"podSelector": {}}] * 32},
    ],
    ids=["enabled", "empty lists", "any pod", "selectors", "ipBlock", "metrics", "32 peers"],
)
def test_network_policy_peers_as_in_networking_v1_are_accepted(network: dict[str, Any]) -> None:
    assert check(cluster(**network)) == []


CLIENT = "spec.networkPolicy.clients[0]"


@pytest.mark.parametrize(
    ("network", "refused_at"),
    [
        ({"clients": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}, f"{CLIENT}.ipBlock.cidr"),
        ({"clients": [{"ipBlock": {"cidr": "10.0.0.256/8"}}]}, f"{CLIENT}.ipBlock.cidr"),
        ({"clients": [{"ipBlock": {"cidr": "10.0.0.0"}}]}, f"{CLIENT}.ipBlock.cidr"),
        ({"clients": [{"ipBlock": {"cidr": "::/129"}}]}, f"{CLIENT}.ipBlock.cidr"),
        ({"clients": [{"ipBlock": {"cidr": "a/8", "except": []}}]}, f"{CLIENT}.ipBlock.cidr"),
        ({"clients": [{"ipBlock": {"except": ["10.0.0.0/9"]}}]}, f"{CLIENT}.ipBlock.cidr"),
        (
            {"clients": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0"]}}]},
            f"{CLIENT}.ipBlock.except[0]",
        ),
        (
            {"clients": [{"podSelector": {"matchLabels": {"app": "a b"}}}]},
            f"{CLIENT}.podSelector.matchLabels.app",
        ),
        (
            {"clients": [{"podSelector": {"matchLabels": {"app": "x" * 64}}}]},
            f"{CLIENT}.podSelector.matchLabels.app",
        ),
        (
            {"clients": [{"namespaceSelector": expressions({"key": "a"})}]},
            f"{CLIENT}.namespaceSelector.matchExpressions[0].operator",
        ),
        (
            {"clients": [{"podSelector": expressions({"key": "a", "operator": "Gt"})}]},
            f"{CLIENT}.podSelector.matchExpressions[0].operator",
        ),
        (
            {"clients": [{"podSelector": expressions({"key": "a/b/c", "operator": "Exists"})}]},
            f"{CLIENT}.podSelector.matchExpressions[0].key",
        ),
        ({"clients": [{"podselector": {}}]}, f"{CLIENT}.podselector"),
        ({"clients": [{"podSelector": {}}] * 33}, "spec.networkPolicy.clients"),
        ({"metricsFrom": {"podSelector": {}}}, "spec.networkPolicy.metricsFrom"),
        ({"enabled": "yes"}, "spec.networkPolicy.enabled"),
        ({"ingress": []}, "spec.networkPolicy.ingress"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)  # fmt: skip
def test_what_a_network_policy_cannot_hold_is_refused_naming_the_field(
    network: dict[str, Any], refused_at: str
) -> None:
    assert refused_at in paths(cluster(**network))


def test_a_peer_needs_one_selector_or_an_ip_block_alone() -> None:
    assert paths(cluster(clients=[{}])) == [CLIENT]
    both = {"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}
    assert paths(cluster(metricsFrom=[{"podSelector": {}}, both])) == [
        "spec.networkPolicy.metricsFrom[1].ipBlock"
    ]


@pytest.mark.parametrize(
    ("operator", "values", "refused"),
    [
        ("In", None, True),
        ("In", [], True),
        ("NotIn", ["a"], False),
        ("Exists", None, False),
        ("Exists", [], False),
        ("DoesNotExist", ["a"], True),
    ],
)
def test_values_belong_to_in_and_not_in(
    operator: str, values: list[str] | None, refused: bool
) -> None:
    requirement: dict[str, Any] = {"key": "tier", "operator": operator}
    if values is not None:
        requirement["values"] = values
    problems = paths(cluster(clients=[{"podSelector": expressions(requirement)}]))
    expected = [f"{CLIENT}.podSelector.matchExpressions[0].values"] if refused else []
    assert problems == expected


def test_only_a_cluster_the_operator_runs_has_one() -> None:
    external = cluster()
    external["spec"]["external"] = {"nameServer": "ns:9876"}
    assert paths(external) == ["spec.networkPolicy.enabled"]
    external["spec"]["networkPolicy"]["enabled"] = False
    assert paths(external) == []


def test_enabled_defaults_to_false_and_an_absent_policy_stays_absent() -> None:
    schema = root_schema(CRDS["BrokerCluster"])
    stored = defaulted(schema, {"metadata": {"name": "orders"}, "spec": {"networkPolicy": {}}})
    assert stored["spec"]["networkPolicy"] == {"enabled": False}
    assert not cluster_spec(stored).network_policy
    plain = defaulted(schema, {"metadata": {"name": "orders"}, "spec": {}})
    assert "networkPolicy" not in plain["spec"]
    spec = cluster_spec(cluster(clients=[{"podSelector": {}}], metricsFrom=[{"ipBlock": {}}]))
    assert spec.network_policy
    assert spec.network_clients == ({"podSelector": {}},)
    assert spec.metrics_from == ({"ipBlock": {}},)


@given(st.ip_addresses(), st.integers(0, 128))
def test_the_cidr_pattern_accepts_what_python_reads_as_a_network(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, prefix: int
) -> None:
    if prefix > address.max_prefixlen:
        prefix = address.max_prefixlen
    text = f"{address}/{prefix}"
    assert re.search(CIDR, text), text


@given(st.integers(0, 300), st.integers(0, 300), st.integers(0, 40))
def test_the_cidr_pattern_refuses_ipv4_octets_and_prefixes_out_of_range(
    first: int, last: int, prefix: int
) -> None:
    text = f"{first}.0.0.{last}/{prefix}"
    assert bool(re.search(CIDR, text)) == (first <= 255 and last <= 255 and prefix <= 32)
