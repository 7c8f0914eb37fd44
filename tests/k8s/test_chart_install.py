"""The Helm chart against a real API server: every values file of the matrix rendered with
prometheus-operator's API (minimal monitoring CRDs installed here) and applied with
server-side dry-run; the operator's pod admitted under the restricted Pod Security Standard
(and one that is not, refused); and GitOps: the chart and ``examples/`` applied, two replicas
of the operator run exactly as the Deployment runs them, as the chart's ServiceAccount with
the chart's RBAC, and a second apply changes nothing, because the operator wrote only status,
finalizers and its own annotations."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from ..chart.helm import (
    MONITORING_APIS,
    Helm,
    by_kind,
    one,
    require_helm,
    values_files,
)
from ..integration.cluster import Cluster
from ..polling import eventually
from .conftest import missing
from .control_plane import ControlPlane, free_ports
from .operator_process import OperatorProcess
from .operator_support import REPO, brokers, ensure_crds, install_crds, new_namespace

GITOPS = "gitops"
"""The field manager of the applies, as a GitOps tool's server-side apply would have one."""
OPERATOR_SCRIPT = shutil.which("reconsume-operator") or str(
    Path(sys.executable).with_name("reconsume-operator")
)
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
OWN_ANNOTATIONS = "f:operator.reconsume.io/"

# ---------------------------------------------------------------- fixtures and helpers

__all__ = ["brokers"]


@pytest.fixture(scope="module")
def helm() -> Helm:
    return require_helm(missing)


def monitoring_crd(kind: str, plural: str) -> dict[str, Any]:
    """A minimal definition of one of prometheus-operator's kinds (any content accepted)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """reconsume's and Kopf's CRDs, and prometheus-operator's three kinds."""
    with control_plane.api_client() as api:
        install_crds(api)
        ensure_crds(
            api,
            [
                monitoring_crd("ServiceMonitor", "servicemonitors"),
                monitoring_crd("PodMonitor", "podmonitors"),
                monitoring_crd("PrometheusRule", "prometheusrules"),
            ],
        )
        yield api


def apply(
    api: kubernetes.client.ApiClient, obj: dict[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    """Server-side apply as the GitOps field manager, never forcing: a field another manager
    owns with a different value is a 409 conflict."""
    client = DynamicClient(api)
    resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    done = client.server_side_apply(
        resource,
        body=obj,
        namespace=obj["metadata"].get("namespace"),
        field_manager=GITOPS,
        dry_run="All" if dry_run else None,
    )
    result: dict[str, Any] = done.to_dict()
    return result


def get(api: kubernetes.client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    client = DynamicClient(api)
    resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    found: dict[str, Any] = client.get(
        resource, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")
    ).to_dict()
    return found


def ensure_namespace(api: kubernetes.client.ApiClient, name: str, **labels: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    apply(api, body)


def load_examples(namespace: str) -> list[dict[str, Any]]:
    objects = []
    for path in EXAMPLES:
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                document["metadata"]["namespace"] = namespace
                objects.append(document)
    return objects


# ---------------------------------------------------------------- server-side dry run


@pytest.mark.parametrize("path", values_files(), ids=lambda path: path.stem)
def test_rendered_chart_passes_server_side_dry_run(
    helm: Helm, installed: kubernetes.client.ApiClient, path: Path
) -> None:
    api = installed
    release_namespace = new_namespace(api)
    values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for watched in values.get("watchNamespaces") or []:
        ensure_namespace(api, watched)
    objects = helm.render(
        values=[path],
        api_versions=MONITORING_APIS,
        extra=["--include-crds"],
        namespace=release_namespace,
    )
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "ClusterRole", "CustomResourceDefinition", "PrometheusRule"} <= kinds
    refused = []
    for obj in objects:
        try:
            applied = apply(api, obj, dry_run=True)
        except ApiException as exc:
            refused.append(f"{obj['kind']} {obj['metadata']['name']}: {exc.status} {exc.body}")
            continue
        assert applied["kind"] == obj["kind"]
    assert refused == []


# ---------------------------------------------------------------- Pod Security Standards


def operator_pod(helm: Helm, namespace: str, *sets: str) -> dict[str, Any]:
    deployment = one(helm.render(sets=sets), "Deployment")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator", "namespace": namespace},
        "spec": deployment["spec"]["template"]["spec"],
    }


def test_operator_pod_meets_the_restricted_pod_security_standard(
    helm: Helm, installed: kubernetes.client.ApiClient
) -> None:
    api = installed
    namespace = f"restricted-{uuid.uuid4().hex[:8]}"
    ensure_namespace(
        api,
        namespace,
        **{
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        },
    )
    core = kubernetes.client.CoreV1Api(api)
    admitted = core.create_namespaced_pod(namespace, operator_pod(helm, namespace), dry_run="All")
    assert admitted.metadata.name == "operator"
    # The same admission refuses a pod that breaks the profile: the check above can fail.
    weaker = operator_pod(helm, namespace, "securityContext.allowPrivilegeEscalation=true")
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, weaker, dry_run="All")
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert "allowPrivilegeEscalation != false" in message


# ---------------------------------------------------------------- GitOps


def service_account_kubeconfig(
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    name: str,
    path: Path,
) -> Path:
    """A kubeconfig with a token of the ServiceAccount (TokenRequest): the operator then has
    exactly the chart's RBAC, as in its pod."""
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(
            audiences=[f"{control_plane.server}/"], expiration_seconds=3600
        )
    )
    token = (
        kubernetes.client.CoreV1Api(api)
        .create_namespaced_service_account_token(name, namespace, request)
        .status.token
    )
    ca = base64.b64encode(control_plane.credentials.ca_cert.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": control_plane.server, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": "c", "context": {"cluster": "c", "user": name, "namespace": namespace}}
        ],
        "current-context": "c",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def start_replica(
    name: str, deployment: dict[str, Any], kubeconfig: Path, workdir: Path
) -> OperatorProcess:
    """``reconsume-operator`` (the image's entrypoint) with the Deployment's arguments and
    environment (``POD_IP`` 127.0.0.1); only the ports are free ones of this machine."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    metrics_port, liveness_port = free_ports(2)
    args = [
        f"--metrics-port={metrics_port}" if arg.startswith("--metrics-port=") else
        f"--liveness-port={liveness_port}" if arg.startswith("--liveness-port=") else arg
        for arg in container["args"]
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    # The downward API's one field the chart reads, as a process on loopback has it.
    fields = {"status.podIP": "127.0.0.1"}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    log = workdir / f"operator-{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [OPERATOR_SCRIPT, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return OperatorProcess(name, popen, log, metrics_port)


def foreign_fields(obj: dict[str, Any]) -> list[str]:
    """What managers other than the GitOps one own of ``obj``, outside status, finalizers and
    annotations under operator.reconsume.io/."""
    found = []
    for entry in (
        obj["metadata"].get("managed_fields") or obj["metadata"].get("managedFields") or []
    ):
        manager = entry.get("manager")
        if manager == GITOPS:
            continue
        fields = entry.get("fields_v1") or entry.get("fieldsV1") or {}
        for key, value in fields.items():
            if key == "f:status":
                continue
            if key == "f:metadata":
                for meta_key, meta_value in value.items():
                    if meta_key == "f:finalizers":
                        continue
                    if meta_key == "f:annotations" and all(
                        name.startswith(OWN_ANNOTATIONS) or name == "." for name in meta_value
                    ):
                        continue
                    found.append(f"{manager}: metadata.{meta_key} {meta_value}")
                continue
            found.append(f"{manager}: {key} {value}")
    return found


def test_gitops_apply_twice_changes_nothing(
    helm: Helm,
    installed: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    brokers: Cluster,
    tmp_path: Path,
) -> None:
    api = installed
    release_namespace = new_namespace(api)
    watched = new_namespace(api)
    release = f"gitops-{uuid.uuid4().hex[:6]}"
    chart = helm.render(
        sets=[
            f"watchNamespaces={{{watched}}}",
            "operator.driftSeconds=2",
            "peering.lifetimeSeconds=10",
        ],
        api_versions=MONITORING_APIS,
        extra=["--include-crds"],
        release=release,
        namespace=release_namespace,
    )
    # A DeadLetterJob on Spark-on-Kubernetes (its own group, so it does not wait for the
    # examples' jobs): the operator must be allowed to grant its driver's Role. Its group is
    # on brokers that run here (an external cluster), so that it becomes Ready and the job
    # starts; the examples' operator-run cluster has no pods here, so their jobs wait.
    payments_cluster = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "payments", "namespace": watched},
        "spec": {"external": {"nameServer": brokers.namesrv.address}},
    }
    k8s_job = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "DeadLetterJob",
        "metadata": {"name": "payments-reprocess", "namespace": watched},
        "spec": {
            "consumerGroup": "payments-consumer",
            "action": "Reprocess",
            "spark": {"master": "k8s://https://kubernetes.default.svc"},
        },
    }
    payments = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "payments-consumer", "namespace": watched},
        "spec": {"cluster": "payments", "groupName": "GID_payments", "deletionPolicy": "Retain"},
    }
    git = [*chart, *load_examples(watched), payments_cluster, payments, k8s_job]
    for obj in git:
        apply(api, obj)

    deployment = one(chart, "Deployment")
    sa = one(chart, "ServiceAccount")["metadata"]["name"]
    kubeconfig = service_account_kubeconfig(
        api, control_plane, release_namespace, sa, tmp_path / "kubeconfig"
    )
    replicas = [start_replica(f"r{i}", deployment, kubeconfig, tmp_path) for i in range(2)]
    custom = kubernetes.client.CustomObjectsApi(api)
    try:

        def logs() -> str:
            return "\n\n".join(replica.tail() for replica in replicas)

        # Both replicas in the chart's KopfPeering, with different priorities.
        def peers() -> list[Any] | None:
            obj = custom.get_namespaced_custom_object(
                "kopf.dev", "v1", watched, "kopfpeerings", "reconsume"
            )
            found = [p for p in (obj.get("status") or {}).values() if isinstance(p, dict)]
            return found if len(found) == 2 else None

        found = eventually(peers, 60, "two replicas in the KopfPeering", detail=logs)
        assert len({peer["priority"] for peer in found}) == 2

        # The operator acted on everything: finalizers and status on the examples, the
        # operator-run cluster's children, the Role of the job whose group is Ready, and the
        # examples' jobs waiting for theirs.
        def reconciled() -> bool:
            for obj in git:
                if obj["apiVersion"].startswith("reconsume.io/"):
                    now = get(api, obj)
                    if not now.get("status") or not now["metadata"].get("finalizers"):
                        return False
            apps = kubernetes.client.AppsV1Api(api)
            batch = kubernetes.client.BatchV1Api(api)
            rbac = kubernetes.client.RbacAuthorizationV1Api(api)
            try:
                apps.read_namespaced_stateful_set("orders-broker", watched)
                rbac.read_namespaced_role("payments-reprocess-spark", watched)
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            archive = custom.get_namespaced_custom_object(
                "reconsume.io", "v1alpha1", watched, "deadletterjobs", "orders-dlq-archive"
            )
            reasons = {
                c.get("reason") for c in (archive.get("status") or {}).get("conditions") or ()
            }
            if "WaitingForConsumerGroup" not in reasons:
                return False
            with pytest.raises(ApiException):  # no CronJob before its group is Ready
                batch.read_namespaced_cron_job("orders-dlq-archive", watched)
            return True

        eventually(reconciled, 90, "the operator reconciled the examples", detail=logs)
    finally:
        for replica in replicas:
            replica.stop()

    # The name servers and brokers the operator runs meet the restricted profile too.
    restricted = f"restricted-{uuid.uuid4().hex[:8]}"
    ensure_namespace(api, restricted, **{"pod-security.kubernetes.io/enforce": "restricted"})
    core = kubernetes.client.CoreV1Api(api)
    for kind, name in (("StatefulSet", "orders-broker"), ("Deployment", "orders-namesrv")):
        meta = {"name": name, "namespace": watched}
        workload = get(api, {"apiVersion": "apps/v1", "kind": kind, "metadata": meta})
        pod_spec = workload["spec"]["template"]["spec"]
        for claim in workload["spec"].get("volumeClaimTemplates") or []:
            volume = claim["metadata"]["name"]
            pod_spec["volumes"].append(
                {"name": volume, "persistentVolumeClaim": {"claimName": f"{volume}-0"}}
            )
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec}
        core.create_namespaced_pod(restricted, pod, dry_run="All")

    # The second apply: nothing changes and nothing conflicts.
    changed, conflicts, foreign = [], [], []
    for obj in git:
        before = get(api, obj)
        try:
            after = apply(api, obj)
        except ApiException as exc:
            conflicts.append(f"{obj['kind']} {obj['metadata']['name']}: {exc.status} {exc.body}")
            continue
        what = f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        if after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]:
            changed.append(what)
        if obj["kind"] != "CustomResourceDefinition":  # created before, by install_crds
            foreign += [f"{what}: {field}" for field in foreign_fields(before)]
    assert conflicts == []
    assert changed == []
    assert foreign == [], "\n".join(foreign)
    # The operator did write (so the check above is not vacuous).
    group = get(api, payments)
    managers = {entry["manager"] for entry in group["metadata"]["managedFields"]}
    assert managers - {GITOPS}, managers
    assert by_kind(chart, "KopfPeering")
