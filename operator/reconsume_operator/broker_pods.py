"""The brokers' objects: their settings file, StatefulSets, disruption budgets and, with
``spec.replicas`` above 1, the Leases that elect each broker's master and the right to use them.

Without replicas one StatefulSet runs the brokers, each a shard of its own, and one
PodDisruptionBudget lets at most one be evicted at a time (while a broker is away its queues
are unavailable). With replicas every replica has a StatefulSet (:mod:`reconsume_operator.naming`)
and each broker

* elects its master through the Lease named as the broker (``--election kube:<broker>``): the
  pods run as the ServiceAccount ``<cluster>-broker``, whose Role may only get and update
  those Leases (and the master Services' slices, :mod:`reconsume_operator.master_services`);
  the operator creates each Lease empty (owned by the BrokerCluster, so it goes with it) and
  never writes it again;
* is reached by clients at a stable address, the Service ``<broker>-master``, which its
  master points at itself (``--master-service``);
* has a PodDisruptionBudget of its own (at most one of its pods evicted at a time: never the
  master and its last in-sync replica together);
* prefers its pods on different nodes (a node's loss then costs each broker one pod);
* is restarted by the operator, not by the StatefulSet controller (``OnDelete``): replicas
  first, the master last, which hands its lease to an in-sync replica as it stops
  (:mod:`reconsume_operator.rollout`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.master_services import endpoint_rules, master_service_name
from reconsume_operator.naming import (
    BROKER_GRPC_MASTER_PORT,
    BROKER_GRPC_PORT,
    BROKER_HTTP_PORT,
    BROKER_MASTER_PORT,
    BROKER_PORT,
    CONFIG_DIR,
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    CONTAINER_SECURITY,
    POD_INDEX_LABEL,
    POD_SECURITY,
    REPLICA_LABEL,
    STORE_DIR,
    TMP_MOUNT,
    TMP_VOLUME,
    broker_name,
    broker_names,
    config_name,
    labels,
    meta,
    name_server,
    replica_set_name,
    selector,
    service_account_name,
)
from reconsume_operator.pod_security import (
    security_args,
    security_env,
    security_mounts,
    security_volumes,
)

LEASE_API = "coordination.k8s.io/v1"


def broker_config_toml(spec: ClusterSpec) -> str:
    """The brokers' settings file: what the BrokerCluster spec sets (the command line adds
    each pod's own name and addresses)."""
    return "\n".join(
        [
            f"cluster_name = {json.dumps(spec.name)}",
            f"flush_mode = {json.dumps(spec.flush)}",
            f"delay_levels = {json.dumps(spec.delay_levels.strip())}",
            f'http_listen = ":{BROKER_HTTP_PORT}"',
            f'grpc_listen = ":{BROKER_GRPC_PORT}"',
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
        "metadata": meta(config_name(spec.name), spec, "broker"),
        "data": {CONFIG_FILE: broker_config_toml(spec)},
    }


def _env(spec: ClusterSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    if spec.replicated:
        index = f"metadata.labels['{POD_INDEX_LABEL}']"
        env += [
            {"name": "BROKER_INDEX", "valueFrom": {"fieldRef": {"fieldPath": index}}},
            {"name": "BROKER_NAME", "value": f"{broker_name(spec.name)}-$(BROKER_INDEX)"},
        ]
    return env + security_env(spec, broker=True)


def _args(spec: ClusterSpec, replica: int) -> list[str]:
    args = [
        "broker",
        "--config",
        f"{CONFIG_DIR}/{CONFIG_FILE}",
        "--listen",
        f":{BROKER_PORT}",
        "--advertise",
        f"$(POD_IP):{BROKER_PORT}",
        "--namesrv",
        name_server(spec),
        "--store-dir",
        STORE_DIR,
    ]
    args += security_args(spec)
    if not spec.replicated:
        return [*args, "--broker-name", "$(POD_NAME)"]
    return [
        *args,
        "--broker-name",
        "$(BROKER_NAME)",
        "--broker-id",
        str(replica),
        "--election",
        "kube:$(BROKER_NAME)",
        "--master-service",
        master_service_name("$(BROKER_NAME)"),
        "--master-port",
        str(BROKER_MASTER_PORT),
        "--master-grpc-port",
        str(BROKER_GRPC_MASTER_PORT),
        "--replication",
        spec.replication,
        "--replicas",
        str(spec.replicas),
    ]


def _pod_labels(spec: ClusterSpec, replica: int) -> dict[str, str]:
    pod_labels = labels(spec.name, "broker")
    if spec.replicated:
        pod_labels[REPLICA_LABEL] = str(replica)
    return pod_labels


def _set_selector(spec: ClusterSpec, replica: int) -> dict[str, str]:
    """The first StatefulSet keeps the selector it was created with (a selector cannot
    change); a replica's selects its own pods only."""
    chosen = selector(spec.name, "broker")
    if replica > 0:
        chosen[REPLICA_LABEL] = str(replica)
    return chosen


SPREAD = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "matchLabelKeys": [POD_INDEX_LABEL],
                    "labelSelector": {
                        "matchLabels": {"app.kubernetes.io/component": "broker"},
                    },
                },
            }
        ]
    }
}
"""Pods of one broker (same pod index) on different nodes where there are several; preferred,
not required, so a one-node cluster still runs them."""


def broker_statefulset(
    spec: ClusterSpec, replicas: int | None = None, replica: int = 0
) -> dict[str, Any]:
    """The StatefulSet of replica ``replica`` of every broker; ``replicas`` (default
    ``spec.brokers``) differs while a scale-down waits for the brokers to remove to drain."""
    container: dict[str, Any] = {
        "name": "broker",
        "image": spec.image,
        "command": ["reconsume"],
        "args": _args(spec, replica),
        "env": _env(spec),
        "ports": [
            {"name": "broker", "containerPort": BROKER_PORT},
            {"name": "http", "containerPort": BROKER_HTTP_PORT},
            {"name": "grpc", "containerPort": BROKER_GRPC_PORT},
            *(
                [
                    {"name": "master", "containerPort": BROKER_MASTER_PORT},
                    {"name": "grpc-master", "containerPort": BROKER_GRPC_MASTER_PORT},
                ]
                if spec.replicated
                else []
            ),
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
            *security_mounts(spec, broker=True),
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
    pod_spec: dict[str, Any] = {
        # A broker flushes and closes its store on SIGTERM (a master hands its lease over).
        "terminationGracePeriodSeconds": 60,
        "securityContext": dict(POD_SECURITY),
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": config_name(spec.name)}},
            dict(TMP_VOLUME),
            *security_volumes(spec, broker=True),
        ],
    }
    set_spec: dict[str, Any] = {
        "serviceName": broker_name(spec.name),
        "replicas": spec.brokers if replicas is None else replicas,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": _set_selector(spec, replica)},
        "template": {
            "metadata": {
                "labels": _pod_labels(spec, replica),
                "annotations": {CONFIG_HASH_ANNOTATION: config_hash(spec)},
            },
            "spec": pod_spec,
        },
        "volumeClaimTemplates": [{"metadata": {"name": "store"}, "spec": claim_spec}],
    }
    if spec.replicated:
        pod_spec["serviceAccountName"] = service_account_name(spec.name)
        pod_spec["affinity"] = SPREAD
        set_spec["updateStrategy"] = {"type": "OnDelete"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(replica_set_name(spec.name, replica), spec, "broker"),
        "spec": set_spec,
    }


def broker_disruption_budgets(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """One budget for all brokers, or with replicas one per broker (of ``count``)."""
    if not spec.replicated:
        return [
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta(broker_name(spec.name), spec, "broker"),
                "spec": {
                    "maxUnavailable": 1,
                    "selector": {"matchLabels": selector(spec.name, "broker")},
                },
            }
        ]
    budgets = []
    for index, name in enumerate(broker_names(spec.name, count)):
        pods = {**selector(spec.name, "broker"), POD_INDEX_LABEL: str(index)}
        budgets.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta(name, spec, "broker"),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": pods}},
            }
        )
    return budgets


def lease_access(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """The brokers' ServiceAccount and its right to get and update their Leases, get their
    master Services and get and update those Services' EndpointSlices, only."""
    name = service_account_name(spec.name)
    role_name = f"{name}-leases"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(name, spec, "broker"),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(role_name, spec, "broker"),
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": broker_names(spec.name, count),
                    "verbs": ["get", "update"],
                },
                *endpoint_rules(spec, count),
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(role_name, spec, "broker"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role_name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": spec.namespace}],
        },
    ]


def leases(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """The brokers' Leases as the operator creates them, empty (nobody has held them): created
    when missing, never updated (the brokers write them)."""
    if not spec.replicated:
        return []
    return [
        {"apiVersion": LEASE_API, "kind": "Lease", "metadata": meta(name, spec, "broker-lease")}
        for name in broker_names(spec.name, count)
    ]


def broker_objects(
    spec: ClusterSpec, replicas: int | None = None, replica_pods: int | None = None
) -> list[dict[str, Any]]:
    """The settings file, with replicas the Lease access, the StatefulSets and the budgets."""
    count = spec.brokers if replicas is None else replicas
    objects = [config_map(spec)]
    if spec.replicated:
        objects += lease_access(spec, max(count, spec.brokers))
    objects.append(broker_statefulset(spec, count, 0))
    for replica in range(1, spec.replicas if spec.replicated else 1):
        pods = count if replica_pods is None else replica_pods
        objects.append(broker_statefulset(spec, pods, replica))
    objects += broker_disruption_budgets(spec, max(count, spec.brokers))
    return objects
