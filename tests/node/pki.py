"""The node's credentials: one CA; the API server's serving certificate (for its addresses
inside the node's namespace and the ``kubernetes`` Service's names), the kubelet's, and a client
certificate and kubeconfig for each component under the identity Kubernetes' bootstrap RBAC
expects (``system:node:<node>`` in ``system:nodes``, ``system:kube-controller-manager``,
``system:kube-scheduler``, ``system:kube-proxy``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.k8s.certs import Credentials, make_credentials
from tests.k8s.control_plane import write_kubeconfig

from . import host
from .configs import API_PORT, API_SERVING_IPS, API_SERVING_NAMES, Layout

COMPONENTS = ("kube-controller-manager", "kube-scheduler", "kube-proxy")


def _component_kubeconfig(
    layout: Layout, component: str, credentials: Credentials, user: str, group: str | None
) -> Path:
    """A kubeconfig of ``user`` reaching the API server on the namespace's loopback."""
    cert, key = credentials.authority.client(f"{component}-client", user, group)
    server = f"https://127.0.0.1:{API_PORT}"
    own = replace(credentials, client_cert=cert, client_key=key)
    return write_kubeconfig(layout.kubeconfig(component), server, own)


def make_pki(layout: Layout) -> Credentials:
    """Every key, certificate and kubeconfig of the node, under ``layout.pki``; the admin's."""
    credentials = make_credentials(layout.pki, API_SERVING_IPS, API_SERVING_NAMES)
    authority = credentials.authority
    authority.server("kubelet", host.NODE_NAME, [host.NODE_ADDRESS], [host.NODE_NAME])
    authority.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
    node_user = f"system:node:{host.NODE_NAME}"
    _component_kubeconfig(layout, "kubelet", credentials, node_user, "system:nodes")
    for component in COMPONENTS:
        _component_kubeconfig(layout, component, credentials, f"system:{component}", None)
    return credentials
