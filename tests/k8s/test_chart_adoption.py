"""``reconsume operator`` run before the chart, then the chart with real helm against a real API
server. The operator creates its peering object (a ClusterKopfPeering with ``-A``, a KopfPeering
in each namespace of ``-n``) when it is missing; ``helm install`` would refuse to install over
an object that is not its release's, so the chart leaves such an object alone (``lookup``):
install, upgrade and uninstall succeed and the operator's object stays, the same object, the
whole time. An object the chart created is its release's, kept by ``helm upgrade`` and deleted
by ``helm uninstall``; one of another release is refused with a message naming that release."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ..chart.helm import CHART, Helm, HelmError, require_helm
from ..polling import eventually
from .conftest import missing
from .control_plane import ControlPlane, free_ports
from .operator_process import SCRIPT, OperatorProcess
from .operator_support import crds, new_namespace

__all__ = ["crds"]

T = TypeVar("T")
OPERATOR_LABEL = ("app.kubernetes.io/managed-by", "reconsume-operator")
RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
MODES = ("cluster-wide", "namespaced")


@pytest.fixture(scope="module")
def helm() -> Helm:
    return require_helm(missing)


class Chart:
    """helm on the control plane's kubeconfig, its releases in one namespace; uninstalls
    what is still installed on close."""

    def __init__(self, helm: Helm, control_plane: ControlPlane, release_namespace: str) -> None:
        self.helm = helm
        self.kubeconfig = control_plane.kubeconfig
        self.namespace = release_namespace
        self.installed: list[str] = []

    def run(self, command: str, release: str, *args: str) -> str:
        chart = [str(CHART)] if command in ("install", "upgrade") else []
        out = self.helm.run(
            command, release, *chart, "--namespace", self.namespace,
            f"--kubeconfig={self.kubeconfig}", *args,
        )  # fmt: skip
        print(f"$ helm {command} {release} ...\n{out}")
        if command == "install":
            self.installed.append(release)
        elif command == "uninstall":
            self.installed.remove(release)
        return out

    def kinds(self, release: str) -> list[str]:
        """The kinds of the objects of the release (``helm get manifest``)."""
        manifest = self.helm.run(
            "get", "manifest", release, "--namespace", self.namespace,
            f"--kubeconfig={self.kubeconfig}",
        )  # fmt: skip
        return [
            line.removeprefix("kind: ")
            for line in manifest.splitlines()
            if line.startswith("kind: ")
        ]

    def close(self) -> None:
        for release in list(self.installed):
            self.run("uninstall", release)


class Peering:
    """The peering object of one mode: read and deleted through the API."""

    def __init__(self, api: kubernetes.client.ApiClient, mode: str, name: str, namespace: str):
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.clusterwide = mode == "cluster-wide"
        self.name = name
        self.namespace = namespace
        self.kind = "ClusterKopfPeering" if self.clusterwide else "KopfPeering"

    def get(self) -> dict[str, Any] | None:
        try:
            if self.clusterwide:
                found: dict[str, Any] = self.custom.get_cluster_custom_object(
                    "kopf.dev", "v1", "clusterkopfpeerings", self.name
                )
            else:
                found = self.custom.get_namespaced_custom_object(
                    "kopf.dev", "v1", self.namespace, "kopfpeerings", self.name
                )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def uid(self) -> str | None:
        found = self.get()
        return found["metadata"]["uid"] if found else None

    def delete(self) -> None:
        try:
            if self.clusterwide:
                self.custom.delete_cluster_custom_object(
                    "kopf.dev", "v1", "clusterkopfpeerings", self.name
                )
            else:
                self.custom.delete_namespaced_custom_object(
                    "kopf.dev", "v1", self.namespace, "kopfpeerings", self.name
                )
        except ApiException as exc:
            if exc.status != 404:
                raise


def chart_values(mode: str, peering: Peering) -> list[str]:
    """``--set`` arguments: the test's peering name and, namespaced, the watched namespace."""
    sets = ["--set", f"peering.name={peering.name}"]
    if not peering.clusterwide:
        sets += ["--set", f"watchNamespaces={{{peering.namespace}}}"]
    return sets


def start_operator(
    control_plane: ControlPlane, mode: str, peering: Peering, workdir: Path
) -> OperatorProcess:
    """``reconsume operator`` on a workstation: ``-A`` or ``-n``, with peering (the default)."""
    (metrics_port,) = free_ports(1)
    scope = ["--all-namespaces"] if peering.clusterwide else ["--namespace", peering.namespace]
    log = workdir / f"operator-{mode}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [
                SCRIPT, "operator", *scope, "--peering", peering.name, "--verbose",
                "--metrics-port", str(metrics_port), "--liveness-port", "0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)},
        )  # fmt: skip
    return OperatorProcess(mode, popen, log, metrics_port)


def waiting(
    operator: OperatorProcess, probe: Callable[[], T | None], timeout_s: float, what: str
) -> T:
    return eventually(probe, timeout_s, what, detail=operator.tail)


@pytest.mark.parametrize("mode", MODES)
def test_helm_installs_upgrades_and_uninstalls_over_the_operators_peering_object(
    helm: Helm,
    crds: None,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
    mode: str,
) -> None:
    watched = new_namespace(api)
    peering = Peering(api, mode, f"adopt-{uuid.uuid4().hex[:8]}", watched)
    chart = Chart(helm, control_plane, new_namespace(api))
    release = f"reconsume-adopt-{uuid.uuid4().hex[:6]}"  # the Deployment's name too
    try:
        # The operator, run by hand first, creates the missing peering object and labels it.
        operator = start_operator(control_plane, mode, peering, tmp_path)
        try:
            created = waiting(operator, peering.get, 60, f"the operator's {peering.kind}")
            waiting(
                operator,
                lambda: (
                    f"created the peering object {peering.kind} {peering.name}"
                    in operator.log_text()
                ),
                30,
                "the operator's log of the creation",
            )
        finally:
            assert operator.stop() == 0, operator.tail()
        labels = created["metadata"].get("labels") or {}
        assert labels.get(OPERATOR_LABEL[0]) == OPERATOR_LABEL[1]
        uid = created["metadata"]["uid"]

        # helm install succeeds, leaves the object alone and creates the rest.
        out = chart.run("install", release, *chart_values(mode, peering))
        assert "STATUS: deployed" in out
        assert peering.uid() == uid
        kinds = chart.kinds(release)
        assert "Deployment" in kinds
        assert peering.kind not in kinds
        apps = kubernetes.client.AppsV1Api(api)
        assert apps.read_namespaced_deployment(release, chart.namespace).metadata.name == release

        # helm upgrade succeeds and neither adopts nor deletes it.
        upgrade = [*chart_values(mode, peering), "--set", "operator.driftSeconds=30"]
        out = chart.run("upgrade", release, *upgrade)
        assert "STATUS: deployed" in out
        assert "REVISION: 2" in out
        kept = peering.get()
        assert kept is not None, f"helm upgrade deleted the {peering.kind}"
        assert kept["metadata"]["uid"] == uid
        assert (kept["metadata"].get("labels") or {}).get(OPERATOR_LABEL[0]) == OPERATOR_LABEL[1]
        assert RELEASE_NAME not in (kept["metadata"].get("annotations") or {})

        # helm uninstall succeeds and leaves it too (the operator's, not the release's).
        out = chart.run("uninstall", release)
        assert f'release "{release}" uninstalled' in out
        assert peering.uid() == uid
        with pytest.raises(ApiException) as gone:
            apps.read_namespaced_deployment(release, chart.namespace)
        assert gone.value.status == 404
    finally:
        chart.close()
        peering.delete()


@pytest.mark.parametrize("mode", MODES)
def test_a_peering_object_the_chart_created_is_its_release_s(
    helm: Helm,
    crds: None,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    mode: str,
) -> None:
    watched = new_namespace(api)
    peering = Peering(api, mode, f"owned-{uuid.uuid4().hex[:8]}", watched)
    chart = Chart(helm, control_plane, new_namespace(api))
    release, other = (f"reconsume-owned-{uuid.uuid4().hex[:6]}" for _ in range(2))
    try:
        # No object yet: the chart creates it, as Helm's.
        chart.run("install", release, *chart_values(mode, peering))
        created = peering.get()
        assert created is not None
        annotations = created["metadata"].get("annotations") or {}
        assert annotations[RELEASE_NAME] == release
        assert annotations[RELEASE_NAMESPACE] == chart.namespace
        assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert peering.kind in chart.kinds(release)

        # helm upgrade renders it again (lookup finds it this release's): kept, not deleted.
        chart.run("upgrade", release, *chart_values(mode, peering))
        assert peering.uid() == created["metadata"]["uid"]
        assert peering.kind in chart.kinds(release)

        # Another release naming the same object is refused, naming the owner.
        with pytest.raises(HelmError) as refused:
            chart.run("install", other, *chart_values(mode, peering))
        message = str(refused.value)
        print(message)
        assert f"belongs to the release {release} in namespace {chart.namespace}" in message
        assert peering.uid() == created["metadata"]["uid"]

        # helm uninstall deletes it with the release.
        chart.run("uninstall", release)
        eventually(lambda: peering.get() is None, 30, f"the {peering.kind} deleted")
    finally:
        chart.close()
        peering.delete()
