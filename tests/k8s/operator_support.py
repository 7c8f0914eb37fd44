"""Helpers of the operator tests: the CRDs installed once, a namespace per test, the operator
in-process (``kopf.testing.KopfRunner``, a registry of its own with a short drift interval),
local brokers reached through ``BrokerCluster.spec.external``, and polling with deadlines."""

from __future__ import annotations

import asyncio
import gc
import uuid
import warnings
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import kopf
import kubernetes.client
import pytest
import yaml
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException

from reconsume.client.admin import AdminClient
from reconsume_operator.config import OperatorConfig
from reconsume_operator.registration import register

from ..integration.cluster import Cluster, start_cluster
from ..polling import eventually
from .control_plane import ControlPlane

REPO = Path(__file__).resolve().parents[2]
CRD_FILES = [*sorted((REPO / "crds").glob("*.yaml")), REPO / "crds" / "kopf" / "peering.yaml"]
GROUP = "reconsume.io"
VERSION = "v1alpha1"
DRIFT_S = 2.0
"""The operator's drift interval in these tests."""

T = TypeVar("T")


def install_crds(api: kubernetes.client.ApiClient) -> None:
    """Create every CRD of ``crds/`` (and Kopf's peering CRDs) unless present; wait until all
    are established."""
    documents = [
        document
        for path in CRD_FILES
        for document in yaml.safe_load_all(path.read_text())
        if document and document.get("kind") == "CustomResourceDefinition"
    ]
    ensure_crds(api, documents)


def ensure_crds(api: kubernetes.client.ApiClient, documents: list[dict[str, Any]]) -> None:
    """Create each CustomResourceDefinition unless present; wait until all are established."""
    extensions = kubernetes.client.ApiextensionsV1Api(api)
    names = []
    for document in documents:
        names.append(document["metadata"]["name"])
        try:
            extensions.create_custom_resource_definition(document)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def established() -> bool:
        for name in names:
            conditions = extensions.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    eventually(established, 30, "CRDs established")


def run_admin(name_servers: list[str], work: Callable[[AdminClient], Coroutine[Any, Any, T]]) -> T:
    async def go() -> T:
        async with AdminClient(name_servers) as admin:
            return await work(admin)

    return asyncio.run(go())


def new_namespace(api: kubernetes.client.ApiClient) -> str:
    name = f"op-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(api).create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))
    )
    return name


def condition_of(body: dict[str, Any], kind: str = "Ready") -> dict[str, Any] | None:
    """The condition of type ``kind`` in ``body``'s status. A probe that needs the condition
    together with other fields reads them all from one body: the operator patches metadata and
    status separately, so two reads can straddle its patches."""
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


class Resources:
    """CRUD of the reconsume.io resources of one namespace."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.namespace = namespace

    def create(self, plural: str, name: str, spec: dict[str, Any], **metadata: Any) -> None:
        kind = {
            "brokerclusters": "BrokerCluster",
            "consumergroups": "ConsumerGroup",
            "users": "User",
        }.get(plural, "Topic")
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, **metadata},
            "spec": spec,
        }
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def patch(self, plural: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, body
        )

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)

    def condition(self, plural: str, name: str, kind: str = "Ready") -> dict[str, Any] | None:
        return condition_of(self.get(plural, name) or {}, kind)

    def events(self, reason: str, name: str | None = None) -> list[str]:
        """Messages of the namespace's Events with ``reason`` (on the object ``name``)."""
        core = kubernetes.client.CoreV1Api(self.custom.api_client)
        return [
            e.message or ""
            for e in core.list_namespaced_event(self.namespace).items
            if e.reason == reason and (name is None or e.involved_object.name == name)
        ]

    def wait_condition(
        self,
        plural: str,
        name: str,
        status: str,
        reason: str | None = None,
        kind: str = "Ready",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            condition = self.condition(plural, name, kind)
            if condition is None or condition.get("status") != status:
                return None
            if reason is not None and condition.get("reason") != reason:
                return None
            return condition

        def last_status() -> str:
            return f"status: {(self.get(plural, name) or {}).get('status')}"

        what = f"{plural}/{name} {kind}={status} ({reason})"
        return eventually(probe, timeout_s, what, interval_s=0.1, detail=last_status)


@contextmanager
def running_operator(
    namespace: str,
    control_plane: ControlPlane,
    *,
    drift_s: float = DRIFT_S,
    name_server_template: str | None = None,
    backoff_s: tuple[float, float] = (0.5, 2.0),
    deletion_timeout_s: float = 600.0,
    pods: tuple[str, dict[str, str]] | None = None,
) -> Iterator[KopfRunner]:
    """The operator in this process, watching ``namespace``, standalone, without metrics,
    logged in with the control plane's client certificate; ``name_server_template`` is its
    ``RECONSUME_NAMESERVER_ADDRESS_TEMPLATE`` (operator-run clusters' name servers);
    ``backoff_s`` the first and the longest retry delay; ``pods`` the namespace and labels
    of the operator's own pods, as the Helm chart tells it (``RECONSUME_OPERATOR_*``)."""
    config = OperatorConfig(
        drift_interval_s=drift_s,
        backoff_base_s=backoff_s[0],
        backoff_max_s=backoff_s[1],
        deletion_timeout_s=deletion_timeout_s,
        metrics_port=None,
        liveness_port=None,
        standalone=True,
        name_server_template=name_server_template,
        pod_namespace=None if pods is None else pods[0],
        pod_labels=() if pods is None else tuple(pods[1].items()),
    )
    registry = kopf.OperatorRegistry()
    register(registry, config, login=False, kube=control_plane.configuration())
    credentials = control_plane.credentials

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=control_plane.server,
            ca_path=str(credentials.ca_cert),
            certificate_path=str(credentials.client_cert),
            private_key_path=str(credentials.client_key),
        )

    runner = KopfRunner(
        ["run", "--standalone", "--namespace", namespace, "--verbose"],
        registry=registry,
        timeout=60,
    )
    with runner:
        yield runner
    # The runner's thread stops its event loop with Kopf's HTTP session to the API server (an
    # aiohttp connector and its TLS connections) still open. Collect them here, where they are
    # known to be garbage, rather than in whichever later test the collector happens to run,
    # where warnings-as-errors would report the ResourceWarning against that test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> None:
    with control_plane.api_client() as api:
        install_crds(api)


@pytest.fixture
def namespace(crds: None, api: kubernetes.client.ApiClient) -> str:
    return new_namespace(api)


@pytest.fixture
def resources(namespace: str, api: kubernetes.client.ApiClient) -> Resources:
    return Resources(api, namespace)


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Cluster]:
    """A name server and two brokers on loopback (tests/integration/cluster.py)."""
    # Brokers register every second, so they find a restarted name server quickly.
    started = start_cluster(tmp_path, extra=("--register-interval-s", "1"))
    yield started
    started.kill()


@pytest.fixture
def operator(namespace: str, control_plane: ControlPlane) -> Iterator[KopfRunner]:
    with running_operator(namespace, control_plane) as runner:
        yield runner
