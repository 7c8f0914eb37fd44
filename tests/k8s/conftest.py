"""The k8s tier's control plane: one etcd and one kube-apiserver for the whole session (see
``control_plane.py``). A missing binary fails the run in CI (``CI=true``) and skips the tests
elsewhere, with the reason and the command that installs it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import kubernetes.client
import pytest

from .control_plane import ControlPlane, default_kube_apiserver, running_control_plane


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> NoReturn:
    """Fail in CI, skip locally."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a k8s test may not be skipped)", pytrace=False)
    pytest.skip(reason)


def find_etcd() -> Path:
    """``$ETCD``, else ``etcd`` on the PATH (Debian's etcd-server installs /usr/bin/etcd)."""
    found = os.environ.get("ETCD") or shutil.which("etcd")
    if not found or not Path(found).is_file():
        missing("etcd is not installed: run `make k8s-deps` (Debian: apt-get install etcd-server)")
    return Path(found)


def find_kube_apiserver() -> Path:
    binary = default_kube_apiserver()
    if not binary.is_file():
        missing(f"kube-apiserver is not built ({binary}): run `make k8s-deps` (needs Go)")
    return binary


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver on free 127.0.0.1 ports, ready (``/readyz``), stopped at the
    end of the session."""
    etcd, kube_apiserver = find_etcd(), find_kube_apiserver()
    with running_control_plane(tmp_path_factory.mktemp("k8s"), etcd, kube_apiserver) as plane:
        yield plane


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """A ``kubernetes`` API client of the session's control plane, closed after the test."""
    with control_plane.api_client() as client:
        yield client
