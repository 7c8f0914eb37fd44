"""The documented uninstall (docs/install.md, Uninstalling) leaves nothing behind. Runs last
among the node tier's files (they run in name order); a test after it would install again."""

from __future__ import annotations

import pytest

from .node import Node
from .support import (
    DEMO_NAMESPACE,
    RELEASE,
    RELEASE_NAMESPACE,
    REPO,
    describe,
    get,
    items,
    save_logs,
    wait_for,
)
from .workloads import CLUSTER, Installation

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_documented_uninstall_leaves_nothing_behind(
    installation: Installation, examples: Node
) -> None:
    node = examples
    save_logs(node, "before-uninstall")
    # 2. The custom resources, while the operator runs: jobs, groups and topics, clusters.
    for kinds in ("dlj", "rcg,rtopic,ruser", "rbc"):
        node.kubectl("delete", kinds, "--all", "-A", "--timeout=180s", timeout_s=200)
    assert not node.kubectl("get", "reconsume", "-A", "-o", "name").stdout.strip()
    # What a BrokerCluster runs goes with it (owner references, the garbage collector).
    selector = f"app.kubernetes.io/instance={CLUSTER}"
    wait_for(
        lambda: (
            not any(
                items(node, kind, DEMO_NAMESPACE, selector)
                for kind in ("statefulsets", "deployments", "services", "configmaps", "pods", "pdb")
            )
        ),
        120,
        "the BrokerCluster's workloads deleted with it",
        node,
    )
    # Its brokers' claims stay (a StatefulSet's claims do), until their namespace goes.
    assert items(node, "pvc", DEMO_NAMESPACE), "the brokers' volume claims are kept"
    # 3. The operator.
    installation.helm.run(
        "uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE,
        f"--kubeconfig={node.kubeconfig}", "--wait",
    )  # fmt: skip
    assert get(node, "clusterkopfpeering", "reconsume") is None
    for namespace in (DEMO_NAMESPACE, RELEASE_NAMESPACE):
        node.kubectl("delete", "namespace", namespace, "--timeout=180s", timeout_s=200)
    # 4. The CRDs last.
    node.kubectl(
        "delete", "-f", str(REPO / "crds"), "-f", str(REPO / "crds" / "kopf" / "peering.yaml"),
        "--timeout=120s", timeout_s=150,
    )  # fmt: skip
    for namespace in (DEMO_NAMESPACE, RELEASE_NAMESPACE):
        assert get(node, "namespace", namespace) is None
    left = [p for p in items(node, "pods") if p["metadata"]["namespace"] != "kube-system"]
    assert not left, describe(node)
    # The brokers' claims went with their namespace, their volumes and directories with them.
    wait_for(lambda: not items(node, "pv"), 120, "every PersistentVolume deleted", node)
    wait_for(lambda: not any(node.layout.volumes.iterdir()), 60, "every volume directory removed")
    crds = node.kubectl("get", "crd", "-o", "name").stdout
    assert "reconsume.io" not in crds, crds
    assert "kopf.dev" not in crds, crds
    assert not node.provisioner.errors, node.provisioner.errors
