"""The node's configuration files and command lines, as pure functions of its directories.

Settings that differ from a kubeadm node, and why (docs/testing.md has the full list):
- containerd's CRI ``restrict_oom_score_adj``: without CAP_SYS_RESOURCE runc cannot give a
  sandbox a negative ``oom_score_adj``;
- the cgroupfs driver in containerd and the kubelet: no systemd;
- the sandbox image is :data:`PAUSE_IMAGE`, built here, and no registry is configured: every
  image is imported beforehand;
- the kubelet's ``resolvConf`` is an empty file and CoreDNS forwards nowhere: no DNS query
  leaves the node;
- kube-proxy leaves the machine-wide conntrack limits alone (``maxPerCore: 0``, timeouts 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .host import (
    API_SERVICE_IP,
    CGROUP_ROOT,
    DNS_SERVICE_IP,
    NODE_ADDRESS,
    NODE_NAME,
    POD_CIDR,
    POD_GATEWAY,
    SERVICE_CIDR,
)

API_PORT = 6443
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
CONTROLLER_MANAGER_PORT, SCHEDULER_PORT = 10257, 10259
KUBELET_PORT, KUBELET_HEALTHZ_PORT = 10250, 10248
PROXY_HEALTHZ_PORT, PROXY_METRICS_PORT = 10256, 10249
"""Fixed: the node's network namespace is its own, nothing else listens there."""

PAUSE_IMAGE = "localhost/reconsume-node/pause:1"
COREDNS_IMAGE_NAME = "localhost/reconsume-node/coredns"
CNI_BIN_DIR = Path("/usr/lib/cni")
CLUSTER_DOMAIN = "cluster.local"
STORAGE_CLASS = "reconsume-local"
PROVISIONER = "reconsume.io/test-local-dir"


class Layout:
    """Where everything of one node lives (under the session's temporary directory)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pki = root / "pki"
        self.logs = root / "logs"
        self.etcd = root / "etcd"
        self.containerd = root / "containerd"
        self.containerd_socket = self.containerd / "containerd.sock"
        self.kubelet = root / "kubelet"
        self.pod_logs = root / "pod-logs"
        self.cni = root / "cni"
        self.volumes = root / "volumes"
        """The local provisioner's directories, one per volume."""
        self.configs = root / "config"

    def kubeconfig(self, component: str) -> Path:
        return self.pki / f"{component}.kubeconfig"

    def config(self, name: str) -> Path:
        return self.configs / name

    def make(self) -> None:
        for directory in (
            self.pki, self.logs, self.containerd, self.kubelet, self.pod_logs,
            self.cni / "net.d", self.cni / "ipam", self.volumes, self.configs,
        ):  # fmt: skip
            directory.mkdir(parents=True, exist_ok=True)


def write_json(path: Path, document: Any) -> Path:
    """JSON is YAML: every Kubernetes configuration file reads it."""
    path.write_text(json.dumps(document, indent=2))
    return path


def containerd_config(layout: Layout) -> str:
    root = layout.containerd
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{layout.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{layout.cni / "net.d"}"
"""


def cni_config(layout: Layout) -> dict[str, Any]:
    """One bridge (``rcn0``) in the node's namespace, the gateway the pods route through."""
    return {
        "cniVersion": "1.0.0",
        "name": "reconsume-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "rcn0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.cni / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(layout: Layout) -> dict[str, Any]:
    pki = layout.pki
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_ADDRESS,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_ROOT}",
        "failSwapOn": False,
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(layout.config("resolv.conf")),
        "podLogsDir": str(layout.pod_logs),
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
    }


def kubelet_command(bin_dir: Path, layout: Layout) -> list[str]:
    return [
        str(bin_dir / "kubelet"),
        f"--config={layout.config('kubelet.json')}",
        f"--kubeconfig={layout.kubeconfig('kubelet')}",
        f"--root-dir={layout.kubelet}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_ADDRESS}",
        "--v=1",
    ]


def kube_proxy_config(layout: Layout) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("kube-proxy"))},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{PROXY_METRICS_PORT}",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def apiserver_command(bin_dir: Path, layout: Layout) -> list[str]:
    pki = layout.pki
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        "--bind-address=0.0.0.0",
        f"--secure-port={API_PORT}",
        f"--advertise-address={NODE_ADDRESS}",
        f"--cert-dir={layout.root / 'apiserver-certs'}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki / 'service-account.pub'}",
        f"--service-account-signing-key-file={pki / 'service-account.key'}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


def _controller_flags(layout: Layout, component: str, port: int) -> list[str]:
    """What the controller manager and the scheduler share: their identity, and /healthz on
    the node's address (reached from the machine)."""
    kubeconfig = layout.kubeconfig(component)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={NODE_ADDRESS}",
        f"--secure-port={port}",
        "--leader-elect=false",
    ]


def controller_manager_command(bin_dir: Path, layout: Layout) -> list[str]:
    pki = layout.pki
    return [
        str(bin_dir / "kube-controller-manager"),
        *_controller_flags(layout, "kube-controller-manager", CONTROLLER_MANAGER_PORT),
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'service-account.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
    ]


def scheduler_command(bin_dir: Path, layout: Layout) -> list[str]:
    return [
        str(bin_dir / "kube-scheduler"),
        *_controller_flags(layout, "kube-scheduler", SCHEDULER_PORT),
    ]


def kube_proxy_command(bin_dir: Path, layout: Layout) -> list[str]:
    return [str(bin_dir / "kube-proxy"), f"--config={layout.config('kube-proxy.json')}", "--v=1"]


API_SERVING_IPS = ("127.0.0.1", NODE_ADDRESS, API_SERVICE_IP)
API_SERVING_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
)
