"""The cases of a BrokerCluster's ``spec.networkPolicy`` in test_apiserver_validation.py's
corpus: peers in every shape networking.k8s.io/v1 allows, and each way a NetworkPolicy could
not hold them, which the API server refuses naming the field as embedded mode's validator
does."""

from __future__ import annotations

from typing import Any

from reconsume.apiserver.crds import API_VERSION

Object = dict[str, Any]


def cluster(external: bool = False, **network: Any) -> Object:
    spec: Object = {"networkPolicy": network}
    if external:
        spec["external"] = {"nameServer": "ns:9876"}
    return {
        "apiVersion": API_VERSION,
        "kind": "BrokerCluster",
        "metadata": {"name": "orders"},
        "spec": spec,
    }


def clients(*peer: Object) -> Object:
    return cluster(enabled=True, clients=list(peer))


def requiring(selector: str = "podSelector", **requirement: Any) -> Object:
    """A peer whose ``selector`` has one requirement."""
    return {selector: {"matchExpressions": [requirement]}}


SELECTOR = {
    "matchLabels": {"app.kubernetes.io/name": "orders-app", "tier": ""},
    "matchExpressions": [
        {"key": "example.com/team", "operator": "In", "values": ["a", "b-c.d_e"]},
        {"key": "canary", "operator": "DoesNotExist", "values": []},
    ],
}

VALID: list[tuple[str, Object]] = [
    ("network policy enabled", cluster(enabled=True)),
    ("network policy off", cluster()),
    (
        "network policy peers of every shape",
        cluster(
            enabled=True,
            clients=[
                {"podSelector": {}},
                {"namespaceSelector": SELECTOR},
                {"podSelector": SELECTOR, "namespaceSelector": {}},
                {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.3.4/32"]}},
                {"ipBlock": {"cidr": "2001:db8::/32"}},
            ],
            metricsFrom=[{"ipBlock": {"cidr": "0.0.0.0/0"}}],
        ),
    ),
    ("network policy off on an external cluster", cluster(external=True, enabled=False)),
]

INVALID: list[tuple[str, Object]] = [
    ("a network policy on an external cluster", cluster(external=True, enabled=True)),
    ("an empty network policy peer", clients({})),
    ("ipBlock with a podSelector", clients({"ipBlock": {"cidr": "1.0.0.0/8"}, "podSelector": {}})),
    ("In without values", clients(requiring(key="a", operator="In"))),
    (
        "DoesNotExist with values",
        cluster(metricsFrom=[requiring("namespaceSelector", key="a", operator="DoesNotExist",
                                       values=["x"])]),
    ),
    ("an unknown selector operator", clients(requiring(key="a", operator="Gt"))),
    ("a label key with two slashes", clients(requiring(key="a/b/c", operator="Exists"))),
    ("a label value with a space", clients({"podSelector": {"matchLabels": {"app": "a b"}}})),
    ("a CIDR prefix of 33", clients({"ipBlock": {"cidr": "10.0.0.0/33"}})),
    ("a CIDR without prefix", clients({"ipBlock": {"cidr": "10.0.0.1"}})),
    ("an ipBlock without cidr", clients({"ipBlock": {"except": ["10.0.0.0/9"]}})),
    ("an unknown peer field", clients({"podselector": {}})),
    ("33 network policy peers", cluster(clients=[{"podSelector": {}}] * 33)),
    ("network policy enabled as a string", cluster(enabled="true")),
]  # fmt: skip

UPDATES: list[tuple[str, Object, Object]] = [
    ("network policy turned off", cluster(enabled=True), cluster(enabled=False)),
    (
        "network policy turned on for an external cluster",
        cluster(external=True),
        cluster(external=True, enabled=True),
    ),
]
