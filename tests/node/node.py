"""A running node as the tests use it: the real kubectl against its API server, its
directories, its processes and its volume provisioner."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.k8s.control_plane import ControlPlane, Process

from . import host
from .configs import Layout
from .provisioner import LocalProvisioner


@dataclass
class Node:
    """A running node, administered as a member of ``system:masters``."""

    layout: Layout
    plane: ControlPlane
    kube_bin_dir: Path
    namespaces: host.Namespaces
    processes: dict[str, Process]
    provisioner: LocalProvisioner

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def kubectl_binary(self) -> Path:
        return self.kube_bin_dir / "kubectl"

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout_s: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """The real kubectl against this node; a failure names the command and its output."""
        command = [str(self.kubectl_binary), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            command, capture_output=True, text=True, input=stdin, timeout=timeout_s
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited with {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def apply(self, documents: list[dict[str, Any]]) -> None:
        """``kubectl apply`` of these objects (a List)."""
        listing = {"apiVersion": "v1", "kind": "List", "items": documents}
        self.kubectl("apply", "-f", "-", stdin=json.dumps(listing))
