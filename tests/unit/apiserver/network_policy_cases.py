"""The CEL cases of a BrokerCluster's ``spec.networkPolicy`` for test_validation.py: each rule
of its peers (in ``clients`` and ``metricsFrom``) and of their selectors' requirements, and
the rule that keeps it off external clusters; each case is (id, violating, satisfying, old,
path refused, (kind, rule's node, rule's beginning))."""

from __future__ import annotations

from typing import Any

from reconsume.apiserver import crds

Object = dict[str, Any]
Case = tuple[str, Object, Object, Object | None, str, tuple[str, str, str]]

PEER_NEEDED = "has(self.podSelector) || has(self.namespaceSelector) || has(self.ipBlock)"
IP_BLOCK_ALONE = "!has(self.ipBlock)"
VALUES = "self.operator in ['In', 'NotIn']"
EXTERNAL = "!has(self.external) || !has(self.networkPolicy)"


def cluster(external: bool = False, **network: Any) -> Object:
    spec: Object = {"networkPolicy": network}
    if external:
        spec["external"] = {"nameServer": "ns:9876"}
    return {
        "apiVersion": crds.API_VERSION,
        "kind": "BrokerCluster",
        "metadata": {"name": "orders"},
        "spec": spec,
    }


def peers(field: str, *peer: Object) -> Object:
    return cluster(enabled=True, **{field: list(peer)})


def requirement(selector: str, **fields: Any) -> Object:
    return {selector: {"matchExpressions": [{"key": "tier", **fields}]}}


def cases() -> list[Case]:
    found: list[Case] = [
        (
            "a network policy on an external cluster",
            cluster(external=True, enabled=True),
            cluster(external=True, enabled=False),
            None,
            "spec.networkPolicy.enabled",
            ("BrokerCluster", "spec", EXTERNAL),
        )
    ]
    for field in ("clients", "metricsFrom"):
        node = f"spec.networkPolicy.{field}[*]"
        found += [
            (
                f"an empty peer in {field}",
                peers(field, {}),
                peers(field, {"namespaceSelector": {}}),
                None,
                f"spec.networkPolicy.{field}[0]",
                ("BrokerCluster", node, PEER_NEEDED),
            ),
            (
                f"an ipBlock with a podSelector in {field}",
                peers(field, {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}),
                peers(field, {"ipBlock": {"cidr": "10.0.0.0/8"}}, {"podSelector": {}}),
                None,
                f"spec.networkPolicy.{field}[0].ipBlock",
                ("BrokerCluster", node, IP_BLOCK_ALONE),
            ),
        ]
        for selector in ("podSelector", "namespaceSelector"):
            found.append(
                (
                    f"In without values in {field} {selector}",
                    peers(field, requirement(selector, operator="In")),
                    peers(field, requirement(selector, operator="Exists")),
                    None,
                    f"spec.networkPolicy.{field}[0].{selector}.matchExpressions[0].values",
                    ("BrokerCluster", f"{node}.{selector}.matchExpressions[*]", VALUES),
                )
            )
    return found


NETWORK_POLICY_CEL_CASES = cases()
