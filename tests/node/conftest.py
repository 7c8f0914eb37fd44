"""The node tier: one real single-node cluster for the whole session (``cluster.py``), with
reconsume's images imported. A missing tool, binary or image fails the run in CI
(``CI=true``) and skips the tests elsewhere, with the reason and the command that installs it.
The tier needs root (namespaces, mounts, cgroups)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chart.helm import Helm, require_helm
from tests.compat.conftest import JavaClient, find_java_client
from tests.k8s.conftest import missing

from .cluster import running_node
from .node import Node
from .prerequisites import prerequisites
from .workloads import CLUSTER, Installation, RetryGroup, retry_group, secret_credentials, sign_as


@pytest.fixture(scope="package")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A running one-node cluster, stopped once the tier's tests are done (see cluster.py)."""
    etcd, bin_dir = prerequisites()
    workdir = tmp_path_factory.mktemp("node")
    with running_node(workdir, bin_dir, etcd) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def helm() -> Helm:
    return require_helm(missing)


@pytest.fixture(scope="package")
def installation(node: Node, helm: Helm) -> Iterator[Installation]:
    """The chart and the examples, made when a test first needs them (see workloads.py);
    uninstalled at the end unless a test did."""
    installed = Installation(node, helm)
    yield installed
    installed.uninstall()


@pytest.fixture
def installed(installation: Installation) -> Node:
    """The operator installed and rolled out."""
    return installation.ensure()


@pytest.fixture
def examples(installation: Installation, monkeypatch: pytest.MonkeyPatch) -> Node:
    """The operator, and ``examples/`` applied: the BrokerCluster ``orders`` ready (with access
    control on, its default: the test's clients sign with the cluster's admin account, which
    the operator generated)."""
    node = installation.ensure_examples()
    sign_as(monkeypatch, secret_credentials(node, f"{CLUSTER}-admin"))
    return node


@pytest.fixture(scope="package")
def java_client() -> JavaClient:
    """Apache RocketMQ's Java client 4.9.8: the compat tier's driver (``make compat-deps``)."""
    return find_java_client()


@pytest.fixture
def dead_letters(examples: Node, java_client: JavaClient, tmp_path: Path) -> RetryGroup:
    """A Topic and ConsumerGroup of the test's own, dead letters in its DLQ (workloads.py)."""
    return retry_group(examples, java_client, tmp_path)
