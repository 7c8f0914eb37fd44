"""The node tier: one real single-node cluster for the whole session (``cluster.py``), with
reconsume's images imported. A missing tool, binary or image fails the run in CI
(``CI=true``) and skips the tests elsewhere, with the reason and the command that installs it.
The tier needs root (namespaces, mounts, cgroups)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chart.helm import Helm, require_helm
from tests.compat.conftest import java_client  # noqa: F401  (the Java client driver)
from tests.k8s.conftest import find_etcd, missing
from tests.k8s.control_plane import kube_bin_dir

from . import host, images
from .cluster import Node, running_node
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


@pytest.fixture(scope="package")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A running one-node cluster, stopped once the tier's tests are done (see cluster.py)."""
    if os.geteuid() != 0:
        missing("the node tier needs root (namespaces, mounts, cgroups)")
    tools = host.tools_missing()
    if tools:
        missing(f"not installed: {', '.join(tools)}: run `make node-deps` (Debian packages)")
    etcd = find_etcd()
    bin_dir = find_kube_bin_dir()
    check_images(bin_dir)
    workdir = tmp_path_factory.mktemp("node")
    with running_node(workdir, bin_dir, etcd) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def helm() -> Helm:
    return require_helm(missing)
