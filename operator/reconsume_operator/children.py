"""The Kubernetes objects a BrokerCluster runs, built as pure functions of its resource.

One name-server Deployment and Service, one broker StatefulSet (broker N is the pod
``<cluster>-broker-N``, its broker name the pod name) with a headless Service and a volume
claim template, a ConfigMap holding the brokers' TOML settings (``reconsume broker
--config``), and a PodDisruptionBudget that lets at most one broker be evicted at a time (a
broker is a shard: while it is away its queues are unavailable). Owner references are added
by the handler (``kopf.adopt``), not here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconsume.topology.clusters import ClusterSpec

NAMESRV_PORT = 9876
BROKER_PORT = 10911
BROKER_HTTP_PORT = 8080
CONFIG_DIR = "/etc/reconsume"
CONFIG_FILE = "broker.toml"
STORE_DIR = "/var/lib/reconsume/store"
CONFIG_HASH_ANNOTATION = "reconsume.io/config-hash"
"""On the broker pods' template: the hash of their settings file. The brokers read the file
once, at start; a spec change that only changes the file (delay levels, flush, retention)
changes this annotation, so the StatefulSet restarts the brokers one at a time."""


def name_server(spec: ClusterSpec) -> str:
    """The address clients and the operator use: the external one, or the name-server
    Service's DNS name."""
    if spec.external_name_server is not None:
        return spec.external_name_server
    return f"{namesrv_name(spec.name)}.{spec.namespace}.svc:{NAMESRV_PORT}"


def namesrv_name(cluster: str) -> str:
    return f"{cluster}-namesrv"


def broker_name(cluster: str) -> str:
    return f"{cluster}-broker"


def config_name(cluster: str) -> str:
    return f"{cluster}-broker-config"


def broker_names(cluster: str, count: int) -> list[str]:
    """Broker names (StatefulSet pod names) of ``count`` shards."""
    return [f"{broker_name(cluster)}-{ordinal}" for ordinal in range(count)]


def labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "reconsume",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "reconsume-operator",
    }


def _selector(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
    }


def _meta(name: str, spec: ClusterSpec, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": labels(spec.name, component)}


def broker_config_toml(spec: ClusterSpec) -> str:
    """The brokers' settings file: what the BrokerCluster spec sets (the command line adds
    each pod's own name and addresses)."""
    return "\n".join(
        [
            f"cluster_name = {json.dumps(spec.name)}",
            f"flush_mode = {json.dumps(spec.flush)}",
            f"delay_levels = {json.dumps(spec.delay_levels.strip())}",
            f'http_listen = "0.0.0.0:{BROKER_HTTP_PORT}"',
            "",
            "[store]",
            f"retention_hours = {spec.retention_hours}",
            "",
        ]
    )


def config_hash(spec: ClusterSpec) -> str:
    return hashlib.sha256(broker_config_toml(spec).encode()).hexdigest()[:16]


def config_map(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(config_name(spec.name), spec, "broker"),
        "data": {CONFIG_FILE: broker_config_toml(spec)},
    }


POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Pod security context of name servers and brokers: the Pod Security Standards' restricted
profile, as the image's user 10001 (docs/images.md); ``fsGroup`` makes the store's volume
writable by that user on storage that is mounted root-owned."""
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
TMP_VOLUME = {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}
"""HOME and temporary files (the root file system is read-only)."""
TMP_MOUNT = {"name": "tmp", "mountPath": "/tmp"}
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
        "args": ["namesrv", "--listen", f"0.0.0.0:{NAMESRV_PORT}"],
        "ports": [{"name": "namesrv", "containerPort": NAMESRV_PORT}],
        "readinessProbe": {"tcpSocket": {"port": "namesrv"}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": "namesrv"}, "periodSeconds": 10},
        "securityContext": dict(CONTAINER_SECURITY),
        "volumeMounts": [dict(TMP_MOUNT)],
    }
    resources = namesrv_resources(spec)
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(namesrv_name(spec.name), spec, "namesrv"),
        "spec": {
            "replicas": spec.name_servers,
            "selector": {"matchLabels": _selector(spec.name, "namesrv")},
            "template": {
                "metadata": {"labels": labels(spec.name, "namesrv")},
                "spec": {
                    "securityContext": dict(POD_SECURITY),
                    "containers": [container],
                    "volumes": [dict(TMP_VOLUME)],
                },
            },
        },
    }


def namesrv_service(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(namesrv_name(spec.name), spec, "namesrv"),
        "spec": {
            "selector": _selector(spec.name, "namesrv"),
            "ports": [{"name": "namesrv", "port": NAMESRV_PORT, "targetPort": "namesrv"}],
        },
    }


def broker_service(spec: ClusterSpec) -> dict[str, Any]:
    """Headless: each broker registers its own pod address, clients never balance over them."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(broker_name(spec.name), spec, "broker"),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _selector(spec.name, "broker"),
            "ports": [
                {"name": "broker", "port": BROKER_PORT, "targetPort": "broker"},
                {"name": "http", "port": BROKER_HTTP_PORT, "targetPort": "http"},
            ],
        },
    }


def broker_statefulset(spec: ClusterSpec, replicas: int | None = None) -> dict[str, Any]:
    """The brokers; ``replicas`` (default ``spec.brokers``) differs while a scale-down waits
    for the brokers to remove to drain."""
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    container: dict[str, Any] = {
        "name": "broker",
        "image": spec.image,
        "command": ["reconsume"],
        "args": [
            "broker",
            "--config",
            f"{CONFIG_DIR}/{CONFIG_FILE}",
            "--listen",
            f"0.0.0.0:{BROKER_PORT}",
            "--advertise",
            f"$(POD_IP):{BROKER_PORT}",
            "--namesrv",
            name_server(spec),
            "--store-dir",
            STORE_DIR,
            "--broker-name",
            "$(POD_NAME)",
        ],
        "env": env,
        "ports": [
            {"name": "broker", "containerPort": BROKER_PORT},
            {"name": "http", "containerPort": BROKER_HTTP_PORT},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_DIR},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            dict(TMP_MOUNT),
        ],
        "securityContext": dict(CONTAINER_SECURITY),
    }
    if spec.resources:
        container["resources"] = dict(spec.resources)
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.storage_size}},
    }
    if spec.storage_class is not None:
        claim_spec["storageClassName"] = spec.storage_class
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(broker_name(spec.name), spec, "broker"),
        "spec": {
            "serviceName": broker_name(spec.name),
            "replicas": spec.brokers if replicas is None else replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": _selector(spec.name, "broker")},
            "template": {
                "metadata": {
                    "labels": labels(spec.name, "broker"),
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash(spec)},
                },
                "spec": {
                    # A broker flushes and closes its store on SIGTERM.
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": dict(POD_SECURITY),
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": config_name(spec.name)}},
                        dict(TMP_VOLUME),
                    ],
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": "store"}, "spec": claim_spec}],
        },
    }


def broker_disruption_budget(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(broker_name(spec.name), spec, "broker"),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(spec.name, "broker")}},
    }


def children(spec: ClusterSpec, broker_replicas: int | None = None) -> list[dict[str, Any]]:
    """Every object the cluster runs, in creation order; none for an external cluster.
    ``broker_replicas`` replaces ``spec.brokers`` as the StatefulSet's replicas."""
    if spec.external:
        return []
    return [
        config_map(spec),
        namesrv_service(spec),
        namesrv_deployment(spec),
        broker_service(spec),
        broker_statefulset(spec, broker_replicas),
        broker_disruption_budget(spec),
    ]
