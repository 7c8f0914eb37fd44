"""What a node needs on the machine, found or reported: root, the Debian packages, etcd, the
Kubernetes binaries and the images. Missing, the tier fails in CI (``CI=true``) and skips
elsewhere, naming the command that installs it."""

from __future__ import annotations

import os
import shutil
import tempfile
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


NODE_DISK_BYTES = 12 << 30
"""Free disk the tier needs where pytest keeps its files: the broker pods' stores (a
preallocated 1 GiB commit-log segment each, up to seven pods at once), the images unpacked in
containerd (about 2.5 GiB), and the kubelet's eviction threshold (1 % of the disk) on top: below
it the node reports disk pressure and new pods stay Pending."""


def check_disk(directory: Path) -> None:
    free = shutil.disk_usage(directory).free
    if free < NODE_DISK_BYTES:
        missing(
            f"{free / (1 << 30):.1f} GiB free on the disk of {directory}; the node tier needs "
            f"{NODE_DISK_BYTES >> 30} GiB (brokers' stores, images, the kubelet's threshold)"
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
    check_disk(Path(tempfile.gettempdir()))
    return etcd, bin_dir
