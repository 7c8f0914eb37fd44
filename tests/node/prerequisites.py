"""What a node needs on the machine, found or reported: root, the Debian packages, etcd, the
Kubernetes binaries and the images. Missing, the tier fails in CI (``CI=true``) and skips
elsewhere, naming the command that installs it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.k8s.conftest import find_etcd, missing
from tests.k8s.control_plane import kube_bin_dir

from . import host, images
from .configs import PAUSE_IMAGE

NODE_BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",
    "coredns",
    "pause",
)


def find_kube_bin_dir() -> Path:
    directory = kube_bin_dir()
    absent = [name for name in NODE_BINARIES if not (directory / name).is_file()]
    if absent:
        missing(f"{', '.join(absent)} not built in {directory}: run `make node-deps` (needs Go)")
    return directory


def check_images(bin_dir: Path) -> None:
    known = images.index()
    wanted = [PAUSE_IMAGE, images.coredns_image(bin_dir)]
    absent = [name for name in wanted if name not in known]
    absent += [
        name
        for name in images.PRODUCT_IMAGES
        if not any(reference.rsplit("/", 1)[-1].startswith(f"{name}:") for reference in known)
    ]
    if absent:
        missing(f"images not built ({', '.join(absent)}): run `make node-deps`")


def prerequisites() -> tuple[Path, Path]:
    """etcd and the directory of the Kubernetes binaries, everything else checked."""
    if os.geteuid() != 0:
        missing("the node tier needs root (namespaces, mounts, cgroups)")
    if tools := host.tools_missing():
        missing(f"not installed: {', '.join(tools)}: run `make node-deps` (Debian packages)")
    etcd = find_etcd()
    bin_dir = find_kube_bin_dir()
    check_images(bin_dir)
    return etcd, bin_dir
