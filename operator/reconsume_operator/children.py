"""The Kubernetes objects a BrokerCluster runs, built as pure functions of its resource.

One name-server Deployment and Service, the brokers (:mod:`reconsume_operator.broker_pods`:
StatefulSets, disruption budgets and, with replicas, the brokers' Leases and their right to
them) with a headless Service and, with replicas, a Service per broker that leads to its master
(:mod:`reconsume_operator.master_services`), a ConfigMap holding the brokers' TOML settings
(``reconsume broker --config``) and, with ``spec.networkPolicy.enabled``, a NetworkPolicy
(:mod:`reconsume_operator.network_policy`). Owner references are added by the handler
(``kopf.adopt``), not here; names and labels are :mod:`reconsume_operator.naming`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.broker_pods import broker_objects
from reconsume_operator.master_services import master_services
from reconsume_operator.naming import (
    BROKER_GRPC_PORT,
    BROKER_HTTP_PORT,
    BROKER_PORT,
    CONTAINER_SECURITY,
    NAMESRV_PORT,
    POD_SECURITY,
    TMP_MOUNT,
    TMP_VOLUME,
    broker_name,
    grpc_service,
    labels,
    meta,
    namesrv_name,
    selector,
)
from reconsume_operator.network_policy import network_policy
from reconsume_operator.pod_security import security_args, security_mounts, security_volumes

NAMESRV_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}
"""A name server's resources unless ``spec.nameServerResources`` sets them: it is one small
Python process (about 30 MiB resident when idle) that keeps the brokers' routes in memory and
answers lookups, so a little CPU and a memory limit with room for many topics and brokers; no
CPU limit, so lookups are not throttled."""


def namesrv_resources(spec: ClusterSpec) -> dict[str, Any]:
    """``spec.nameServerResources``, else :data:`NAMESRV_RESOURCES` (``{}`` sets none)."""
    chosen = NAMESRV_RESOURCES if spec.name_server_resources is None else spec.name_server_resources
    return {key: dict(value) for key, value in chosen.items()}


def namesrv_deployment(spec: ClusterSpec) -> dict[str, Any]:
    container = {
        "name": "namesrv",
        "image": spec.image,
        "command": ["reconsume"],
        "args": ["namesrv", "--listen", f":{NAMESRV_PORT}", *security_args(spec)],
        "ports": [{"name": "namesrv", "containerPort": NAMESRV_PORT}],
        "readinessProbe": {"tcpSocket": {"port": "namesrv"}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": "namesrv"}, "periodSeconds": 10},
        "securityContext": dict(CONTAINER_SECURITY),
        "volumeMounts": [dict(TMP_MOUNT), *security_mounts(spec, broker=False)],
    }
    resources = namesrv_resources(spec)
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(namesrv_name(spec.name), spec, "namesrv"),
        "spec": {
            "replicas": spec.name_servers,
            "selector": {"matchLabels": selector(spec.name, "namesrv")},
            "template": {
                "metadata": {"labels": labels(spec.name, "namesrv")},
                "spec": {
                    "securityContext": dict(POD_SECURITY),
                    "containers": [container],
                    "volumes": [dict(TMP_VOLUME), *security_volumes(spec, broker=False)],
                },
            },
        },
    }


def namesrv_service(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(namesrv_name(spec.name), spec, "namesrv"),
        "spec": {
            "selector": selector(spec.name, "namesrv"),
            "ports": [{"name": "namesrv", "port": NAMESRV_PORT, "targetPort": "namesrv"}],
        },
    }


def broker_service(spec: ClusterSpec) -> dict[str, Any]:
    """Headless: each broker registers its own pod address, clients never balance over them."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(broker_name(spec.name), spec, "broker"),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(spec.name, "broker"),
            "ports": [
                {"name": "broker", "port": BROKER_PORT, "targetPort": "broker"},
                {"name": "http", "port": BROKER_HTTP_PORT, "targetPort": "http"},
                {"name": "grpc", "port": BROKER_GRPC_PORT, "targetPort": "grpc"},
            ],
        },
    }


def grpc_access_service(spec: ClusterSpec) -> dict[str, Any]:
    """``<cluster>-grpc``: the endpoint of RocketMQ 5's clients, balanced over the broker
    pods (any of them answers a route; the route names each queue's own broker)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(grpc_service(spec.name), spec, "broker"),
        "spec": {
            "selector": selector(spec.name, "broker"),
            "ports": [{"name": "grpc", "port": BROKER_GRPC_PORT, "targetPort": "grpc"}],
        },
    }


def children(
    spec: ClusterSpec,
    broker_replicas: int | None = None,
    replica_pods: int | None = None,
    operator: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every object the cluster runs, in creation order; none for an external cluster.
    ``broker_replicas`` replaces ``spec.brokers`` as the brokers' StatefulSets' replicas, and
    ``replica_pods`` (default: the same) the replica StatefulSets' (0 while a cluster that
    gains replicas restarts its first pods into the election). ``operator`` is the operator's
    pods as a NetworkPolicy peer (None: not known); the NetworkPolicy comes first, so the pods
    start behind it."""
    if spec.external:
        return []
    policy = network_policy(spec, operator)
    return [
        *([] if policy is None else [policy]),
        namesrv_service(spec),
        namesrv_deployment(spec),
        broker_service(spec),
        grpc_access_service(spec),
        *master_services(spec, max(spec.brokers, broker_replicas or 0)),
        *broker_objects(spec, broker_replicas, replica_pods),
    ]
