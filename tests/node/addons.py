"""What a cluster has besides its control plane and node: cluster DNS (CoreDNS, as a
Deployment behind the ``kube-dns`` Service, the way kubeadm installs it) and a default
StorageClass served by :mod:`tests.node.provisioner`."""

from __future__ import annotations

from typing import Any

from .configs import CLUSTER_DOMAIN, PROVISIONER, STORAGE_CLASS
from .host import DNS_SERVICE_IP

DNS_PORT = 1053

COREFILE = f""".:{DNS_PORT} {{
    errors
    health {{
        lameduck 5s
    }}
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    cache 30
    reload
    loadbalance
}}
"""
"""Names of the cluster only: no ``forward``, so no query leaves the node. CoreDNS runs as a
user without privileges, so it listens on an unprivileged port; the Service maps 53 to it."""

_DNS_LABELS = {"k8s-app": "kube-dns"}


def coredns(image: str) -> list[dict[str, Any]]:
    meta = {"namespace": "kube-system", "labels": dict(_DNS_LABELS)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", **meta},
            "data": {"Corefile": COREFILE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", **meta},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(_DNS_LABELS)},
                "template": {
                    "metadata": {"labels": dict(_DNS_LABELS)},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",
                        "containers": [
                            {
                                "name": "coredns",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                                    {
                                        "name": "dns-tcp",
                                        "containerPort": DNS_PORT,
                                        "protocol": "TCP",
                                    },
                                ],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"memory": "170Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "runAsNonRoot": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": 8080},
                                    "periodSeconds": 10,
                                },
                                "readinessProbe": {
                                    "httpGet": {"path": "/ready", "port": 8181},
                                    "periodSeconds": 2,
                                },
                                "volumeMounts": [
                                    {
                                        "name": "config",
                                        "mountPath": "/etc/coredns",
                                        "readOnly": True,
                                    }
                                ],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", **meta},
            "spec": {
                "selector": dict(_DNS_LABELS),
                "clusterIP": DNS_SERVICE_IP,
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": "dns", "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": "dns-tcp", "protocol": "TCP"},
                ],
            },
        },
    ]


def storage_class() -> dict[str, Any]:
    """The default class: a directory on the node per claim, bound where the pod is
    scheduled, removed with its claim."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }
