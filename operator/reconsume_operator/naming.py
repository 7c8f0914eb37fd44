"""Names, labels and shared pod settings of the objects a BrokerCluster runs.

Broker N of cluster ``c`` is named ``c-broker-N`` (its broker name, and the name of its first
pod, in the StatefulSet ``c-broker``). With ``spec.replicas`` above 1, its replica R (1 or 2)
is the pod ``c-broker-rR-N`` of the StatefulSet ``c-broker-rR``: every replica StatefulSet has
as many pods as the first, pod N of each belonging to broker N (Kubernetes labels it
``apps.kubernetes.io/pod-index: N``). A cluster that gains replicas keeps its pod names.
"""

from __future__ import annotations

from typing import Any

from reconsume.topology.clusters import ClusterSpec

NAMESRV_PORT = 9876
BROKER_PORT = 10911
BROKER_MASTER_PORT = 10912
"""A replicated broker's master listens here too, for its master Service (``--master-port``):
the port its EndpointSlice names, closed with its connections when it stops being master."""
BROKER_HTTP_PORT = 8080
BROKER_GRPC_PORT = 8081
"""The brokers' gRPC port, RocketMQ 5's clients' (Apache RocketMQ's proxy uses 8081 too)."""
BROKER_GRPC_MASTER_PORT = 8082
"""As :data:`BROKER_MASTER_PORT`, for gRPC (``--master-grpc-port``): the EndpointSlice's port
``grpc``, behind the master Service's port 8081."""
CONFIG_DIR = "/etc/reconsume"
CONFIG_FILE = "broker.toml"
STORE_DIR = "/var/lib/reconsume/store"
CONFIG_HASH_ANNOTATION = "reconsume.io/config-hash"
"""On the broker pods' template: the hash of their settings file. The brokers read the file
once, at start; a spec change that only changes the file (delay levels, flush, retention)
changes this annotation, so the brokers restart one at a time."""
ACL_DIR = "/var/run/reconsume/acl"
"""Where broker and name-server pods mount the cluster's ACL Secret (``<cluster>-acl``)."""
CREDENTIALS_DIR = "/var/run/reconsume/credentials"
"""Where broker pods mount the admin account's Secret: they sign their registrations and
replication with it (``RECONSUME_CREDENTIALS_DIR``)."""
TLS_DIR = "/var/run/reconsume/tls"
"""Where broker and name-server pods mount ``spec.tls.secretName`` (cert-manager's layout)."""
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
"""The label the StatefulSet controller puts on each pod: its ordinal (Kubernetes ≥ 1.28)."""
REPLICA_LABEL = "reconsume.io/replica"
"""On replicated brokers' pods: which replica StatefulSet they belong to (0, 1 or 2)."""


def grpc_service(cluster: str) -> str:
    """The Service RocketMQ 5's clients take as their endpoint: any broker answers a route,
    which names each queue's own broker pod."""
    return f"{cluster}-grpc"


def name_server(spec: ClusterSpec) -> str:
    """The address clients and the operator use: the external one, or the name-server
    Service's DNS name."""
    if spec.external_name_server is not None:
        return spec.external_name_server
    return f"{namesrv_name(spec.name)}.{spec.namespace}.svc:{NAMESRV_PORT}"


def namesrv_name(cluster: str) -> str:
    return f"{cluster}-namesrv"


def broker_name(cluster: str) -> str:
    """The first StatefulSet's name, the headless Service's, and the prefix of broker names."""
    return f"{cluster}-broker"


def config_name(cluster: str) -> str:
    return f"{cluster}-broker-config"


def network_policy_name(cluster: str) -> str:
    """The NetworkPolicy of ``spec.networkPolicy``. Not the cluster's own name: the Helm
    chart's NetworkPolicy of the operator's pods is named as its release (``reconsume``), and
    a BrokerCluster of that name in the operator's namespace would take it over."""
    return f"{cluster}-network-policy"


def service_account_name(cluster: str) -> str:
    """The ServiceAccount the brokers of a replicated cluster run as."""
    return broker_name(cluster)


def broker_names(cluster: str, count: int) -> list[str]:
    """Broker names of ``count`` shards (the first StatefulSet's pod names)."""
    return [f"{broker_name(cluster)}-{ordinal}" for ordinal in range(count)]


def replica_set_name(cluster: str, replica: int) -> str:
    """The StatefulSet of replica ``replica`` (0: the first pods, named as brokers)."""
    return broker_name(cluster) if replica == 0 else f"{broker_name(cluster)}-r{replica}"


def pod_name(cluster: str, broker: int, replica: int) -> str:
    """The pod that is replica ``replica`` of broker ``broker``."""
    return f"{replica_set_name(cluster, replica)}-{broker}"


def labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "reconsume",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "reconsume-operator",
    }


def selector(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
    }


def server_pods(cluster: str) -> dict[str, Any]:
    """A label selector of the cluster's name-server and broker pods (not its DeadLetterJobs'
    run pods, whose instance label is the job's name and may equal a cluster's)."""
    return {
        "matchLabels": {
            "app.kubernetes.io/instance": cluster,
            "app.kubernetes.io/managed-by": "reconsume-operator",
        },
        "matchExpressions": [
            {
                "key": "app.kubernetes.io/component",
                "operator": "In",
                "values": ["broker", "namesrv"],
            }
        ],
    }


def meta(name: str, spec: ClusterSpec, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": labels(spec.name, component)}


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
