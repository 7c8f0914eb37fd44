"""The NetworkPolicy of a BrokerCluster's ``spec.networkPolicy``: who may reach its name-server
and broker pods.

Ingress only (what the pods reach is left alone: the brokers' Leases on the API server, their
name servers, their masters), one rule per kind of traffic:

* the client ports (name server 9876, broker remoting 10911 and gRPC 8081, and the master
  ports 10912 and 8082 that a replicated broker's master Service leads to) from ``clients``,
  or from anywhere when it is empty;
* the brokers' HTTP port 8080 (``/metrics``) from ``metricsFrom``, or from anywhere;
* every port from the cluster's own pods: brokers register with the name servers, and
  replicas replicate from their masters on the remoting port (no port of its own);
* the ports the operator uses (its admin requests to name servers and brokers: 9876, 10911
  and 10912;
  it sends nothing to 8080, 8081 or 8082) from the operator's pods, when it knows them
  (``RECONSUME_OPERATOR_NAMESPACE`` and ``RECONSUME_OPERATOR_POD_LABELS``, which the Helm
  chart sets);
* 9876, 10911 and 10912 from the run pods of the namespace's DeadLetterJobs (labelled
  ``reconsume.io/dead-letter-job``): they read and re-send dead letters as clients.

The kubelet's probes come from the node, which NetworkPolicies do not restrict. Peers are
passed on as the API server stored them (the CRD gives them the schema of
``networking.k8s.io/v1`` NetworkPolicyPeer).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.dead_letter_jobs import JOB_LABEL
from reconsume_operator.naming import (
    BROKER_GRPC_MASTER_PORT,
    BROKER_GRPC_PORT,
    BROKER_HTTP_PORT,
    BROKER_MASTER_PORT,
    BROKER_PORT,
    NAMESRV_PORT,
    meta,
    network_policy_name,
    server_pods,
)

API_VERSION = "networking.k8s.io/v1"
CLIENT_PORTS = (
    NAMESRV_PORT,
    BROKER_PORT,
    BROKER_MASTER_PORT,
    BROKER_GRPC_PORT,
    BROKER_GRPC_MASTER_PORT,
)
"""What clients reach: name servers, brokers' remoting (RocketMQ 4.x) and gRPC (5.x)."""
ADMIN_PORTS = (NAMESRV_PORT, BROKER_PORT, BROKER_MASTER_PORT)
"""What the operator and DeadLetterJob runs reach: the remoting ports."""
METRICS_PORTS = (BROKER_HTTP_PORT,)
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
"""The label Kubernetes gives every namespace: its name."""
RBAC_VERBS = ("list", "create", "patch", "delete")
"""What the operator does with NetworkPolicies, and all the Helm chart grants: server-side
apply (create, patch), and the pruning of one the spec no longer asks for (list, delete)."""


def operator_peer(
    namespace: str | None, pod_labels: Iterable[tuple[str, str]]
) -> dict[str, Any] | None:
    """The operator's pods as a NetworkPolicy peer; None when it does not know them."""
    labels = dict(pod_labels)
    if namespace is None or not labels:
        return None
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}},
        "podSelector": {"matchLabels": labels},
    }


def _ports(numbers: Iterable[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": number} for number in numbers]


def _rule(peers: Sequence[Mapping[str, Any]], ports: Iterable[int] | None) -> dict[str, Any]:
    """An ingress rule; no ``from`` (any source) for no peers, no ``ports`` (every port) for
    None."""
    rule: dict[str, Any] = {}
    if peers:
        rule["from"] = [copy.deepcopy(dict(peer)) for peer in peers]
    if ports is not None:
        rule["ports"] = _ports(ports)
    return rule


def network_policy(
    spec: ClusterSpec, operator: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The cluster's NetworkPolicy; None unless ``spec.networkPolicy.enabled`` (or for an
    external cluster). ``operator`` is the operator's pods as a peer (:func:`operator_peer`)."""
    if spec.external or not spec.network_policy:
        return None
    own = {"podSelector": server_pods(spec.name)}
    dead_letter_jobs = {
        "podSelector": {"matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}]}
    }
    ingress = [
        _rule(spec.network_clients, CLIENT_PORTS),
        _rule(spec.metrics_from, METRICS_PORTS),
        _rule([own], None),
        _rule([dead_letter_jobs], ADMIN_PORTS),
    ]
    if operator is not None:
        ingress.append(_rule([operator], ADMIN_PORTS))
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(network_policy_name(spec.name), spec, "network-policy"),
        "spec": {
            "podSelector": server_pods(spec.name),
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
