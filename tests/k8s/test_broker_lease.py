"""The election's Kubernetes Lease on a real kube-apiserver (and etcd): the store creates,
compares-and-swaps and reads it with a ServiceAccount that has exactly the Role a broker
needs, one without it is refused with an error that says what is missing, and three broker
processes elect their master through it: SIGKILL of the master hands the name to a replica
within a bound, which the Lease and ``kubectl get lease`` show."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes.client
import pytest

from reconsume.broker.kube_api import KubeAccessError
from reconsume.broker.kube_lease import KubeLeaseStore, kube_lease_store
from reconsume.broker.lease import LeaseConflict, LeaseRecord
from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.model import Message

from ..integration.cluster import start_broker
from ..integration.processes import ServerProcess, start_server
from ..polling import eventually
from .conftest import missing
from .control_plane import ControlPlane, kube_bin_dir

NAME = "elected"
"""The broker name of the election tests (test_failover's), so the Lease's name too."""
LEASE_MS = 2000
LEASES = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}


@pytest.fixture
def namespace(api: kubernetes.client.ApiClient) -> str:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    body = kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))
    kubernetes.client.CoreV1Api(api).create_namespace(body)
    return name


def broker_rules(*lease_names: str) -> list[dict[str, object]]:
    """The Role a broker needs: get and update on its Leases, create on leases (which RBAC
    cannot restrict by name: the object has none before it exists)."""
    return [
        {**LEASES, "verbs": ["get", "update"], "resourceNames": list(lease_names)},
        {**LEASES, "verbs": ["create"]},
    ]


def service_account_token(
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    name: str,
    rules: list[dict[str, object]],
    path: Path,
    *,
    create: bool = True,
) -> Path:
    """A ServiceAccount bound to a Role of ``rules`` (none: no Role), its token in ``path``;
    ``create`` False: the ServiceAccount exists already."""
    core = kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    meta = {"name": name, "namespace": namespace}
    if create:
        core.create_namespaced_service_account(namespace, {"metadata": meta})
    if rules:
        rbac.create_namespaced_role(namespace, {"metadata": meta, "rules": rules})
        binding = {
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
        rbac.create_namespaced_role_binding(namespace, binding)
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(
            audiences=[f"{control_plane.server}/"], expiration_seconds=3600
        )
    )
    token = core.create_namespaced_service_account_token(name, namespace, request).status.token
    path.write_text(token)
    return path


def store(
    control_plane: ControlPlane, namespace: str, name: str, token_file: Path
) -> KubeLeaseStore:
    return kube_lease_store(
        f"{namespace}/{name}",
        api=control_plane.server,
        token_file=str(token_file),
        ca_file=str(control_plane.credentials.ca_cert),
        timeout_s=5.0,
    )


def readable(lease_store: KubeLeaseStore) -> bool:
    """Whether the store may read its Lease yet (a new RoleBinding takes a moment)."""
    try:
        asyncio.run(lease_store.read())
    except KubeAccessError:
        return False
    return True


def lease_of(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, object]:
    lease = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    document: dict[str, object] = api.sanitize_for_serialization(lease)
    return document


def test_the_store_creates_and_swaps_a_lease_with_only_the_brokers_role(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    token = service_account_token(
        api, control_plane, namespace, "broker", broker_rules("broker-a"), tmp_path / "token"
    )
    lease_store = store(control_plane, namespace, "broker-a", token)
    eventually(lambda: readable(lease_store), 10, "the Role applies")
    record = LeaseRecord("broker-a-0", "10.0.0.1:10911", 1, ("broker-a-1",), duration_s=2.5)

    async def scenario() -> None:
        assert await lease_store.read() is None  # 404
        first = await lease_store.write(record, None)  # POST
        with pytest.raises(LeaseConflict, match="exists already"):  # 409 AlreadyExists
            await store(control_plane, namespace, "broker-a", token).write(record, None)
        renewed = await lease_store.write(dataclasses.replace(record, in_sync=()), first.version)
        assert renewed.version != first.version
        with pytest.raises(LeaseConflict, match=f"changed since version {first.version}"):
            await lease_store.write(record, first.version)  # 409 Conflict
        assert await lease_store.read() == renewed
        taken = await lease_store.write(
            renewed.taken_by("broker-a-1", "10.0.0.2:1"), renewed.version
        )
        assert (taken.holder, taken.epoch) == ("broker-a-1", 2)

    asyncio.run(scenario())
    lease = lease_of(api, namespace, "broker-a")
    spec, metadata = lease["spec"], lease["metadata"]
    assert isinstance(spec, dict)
    assert isinstance(metadata, dict)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("broker-a-1", 2)
    assert spec["leaseDurationSeconds"] == 3
    assert spec["acquireTime"] == spec["renewTime"]
    assert metadata["annotations"] == {
        "reconsume.io/master-address": "10.0.0.2:1",
        "reconsume.io/lease-duration-ms": "2500",
    }
    # get and update are granted by name: another Lease of the namespace is not the broker's
    with pytest.raises(KubeAccessError, match='cannot get resource "leases"'):
        asyncio.run(store(control_plane, namespace, "broker-b", token).read())


def test_a_service_account_without_the_role_is_refused_with_what_it_needs(
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    namesrv: ServerProcess,
    tmp_path: Path,
) -> None:
    token = service_account_token(api, control_plane, namespace, "nobody", [], tmp_path / "token")
    lease_store = store(control_plane, namespace, NAME, token)
    with pytest.raises(KubeAccessError) as refused:
        asyncio.run(lease_store.read())
    message = str(refused.value)
    assert f"get Lease {namespace}/{NAME}: refused (403)" in message
    assert f"system:serviceaccount:{namespace}:nobody" in message
    assert f"needs get, create and update on leases in namespace {namespace}" in message

    with pytest.raises(RuntimeError) as exited:  # a broker refused ends at start
        start_elected_broker(namesrv, tmp_path, 0, control_plane, namespace, token)
    assert "needs get, create and update on leases" in str(exited.value)

    # The token is read for every request: a rotated (here: another account's) one is used.
    allowed = tmp_path / "allowed"
    service_account_token(api, control_plane, namespace, "broker", broker_rules(NAME), allowed)
    token.write_text(allowed.read_text())
    eventually(lambda: readable(lease_store), 10, "the other token is used")


def start_elected_broker(
    namesrv: ServerProcess,
    root: Path,
    index: int,
    control_plane: ControlPlane,
    namespace: str,
    token: Path,
) -> ServerProcess:
    return start_broker(
        namesrv.address, NAME, root / f"b{index}",
        extra=("--election", f"kube:{namespace}/{NAME}", "--broker-id", str(index),
               "--kube-api", control_plane.server, "--kube-token-file", str(token),
               "--kube-ca-file", str(control_plane.credentials.ca_cert),
               "--replication", "Sync", "--lease-duration-ms", str(LEASE_MS),
               "--replica-lag-max-ms", "1000"),
    )  # fmt: skip


@pytest.fixture
def namesrv() -> Iterator[ServerProcess]:
    process = start_server("namesrv", "--listen", "127.0.0.1:0")
    yield process
    process.stop()


@pytest.fixture
def kubectl(control_plane: ControlPlane) -> Callable[..., str]:
    binary = kube_bin_dir() / "kubectl"
    if not binary.is_file():
        missing(f"kubectl is not built ({binary}): run `make k8s-deps` (needs Go)")

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(binary), f"--kubeconfig={control_plane.kubeconfig}", *args],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout

    return run


def master_address(namesrv: ServerProcess) -> str | None:
    async def ask() -> str | None:
        async with AdminClient([namesrv.address]) as admin:
            return next((b.master for b in await admin.brokers() if b.name == NAME), None)

    return asyncio.run(ask())


async def send_until_acknowledged(namesrv: ServerProcess, body: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    async with Producer([namesrv.address], send_timeout_s=2.0) as producer:
        while True:
            try:
                await producer.send(Message("orders", body.encode()))
                return
            except ReconsumeError:
                assert time.monotonic() < end, f"{body} not acknowledged in {deadline_s} s"
                await asyncio.sleep(0.05)


def test_brokers_elect_through_the_lease_and_a_replica_replaces_a_killed_master(
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    namesrv: ServerProcess,
    kubectl: Callable[..., str],
    tmp_path: Path,
) -> None:
    token = service_account_token(
        api, control_plane, namespace, "broker", broker_rules(NAME), tmp_path / "token"
    )
    eventually(lambda: readable(store(control_plane, namespace, NAME, token)), 10, "Role")

    def annotations() -> dict[str, str]:
        metadata = lease_of(api, namespace, NAME)["metadata"]
        assert isinstance(metadata, dict)
        found: dict[str, str] = metadata.get("annotations") or {}
        return found

    brokers: dict[int, ServerProcess] = {}
    try:
        for i in range(3):
            brokers[i] = start_elected_broker(namesrv, tmp_path, i, control_plane, namespace, token)
        eventually(lambda: master_address(namesrv) == brokers[0].address, 20, "b0 master")
        in_sync = f"{NAME}-1,{NAME}-2"
        eventually(lambda: annotations().get("reconsume.io/in-sync") == in_sync, 20, "in sync")
        asyncio.run(send_until_acknowledged(namesrv, "before", 10))

        killed_at = time.monotonic()
        brokers[0].kill()
        asyncio.run(send_until_acknowledged(namesrv, "during", 20))
        takeover_s = time.monotonic() - killed_at
        print(f"takeover through the Lease: {takeover_s:.2f} s")
        assert takeover_s < 3 * LEASE_MS / 1000 + 2, f"takeover took {takeover_s:.1f} s"

        new_master = master_address(namesrv)
        holder = {b.address: f"{NAME}-{i}" for i, b in brokers.items()}[str(new_master)]
        assert holder in (f"{NAME}-1", f"{NAME}-2")
        lease = lease_of(api, namespace, NAME)
        spec = lease["spec"]
        assert isinstance(spec, dict)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == (holder, 2)
        assert annotations()["reconsume.io/master-address"] == new_master

        header, *rows = kubectl("get", "lease", "-n", namespace).splitlines()
        assert header.split() == ["NAME", "HOLDER", "AGE"]
        assert [row.split()[:2] for row in rows] == [[NAME, holder]]
    finally:
        for process in brokers.values():
            process.stop()
