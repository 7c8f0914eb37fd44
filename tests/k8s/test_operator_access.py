"""Access control of an operator-run BrokerCluster on a real API server: the admin account
generated into a Secret, the ACL Secret rendered from the cluster's Users, Topics and
ConsumerGroups, a User's key generated, rotated with both keys valid for the window, and
revoked on deletion; status saying which brokers enforce it.

Nothing runs pods here. The name server and broker are local processes started as the pods
are (``--acl-file``, the admin account's files as ``RECONSUME_CREDENTIALS_DIR``), and a thread
stands in for the kubelet: it copies the Secrets into files as a Secret volume holds them
(a new directory swapped in by a symbolic link)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.errors import ReconsumeError, RemotingError
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic
from reconsume.topology.clusters import cluster_spec
from reconsume.wire.credential_files import CredentialFiles
from reconsume.wire.signing import Credentials
from reconsume_operator.access_sync import ensure_credentials
from reconsume_operator.config import OperatorConfig
from reconsume_operator.context import OperatorContext
from reconsume_operator.kube import ChildWriter

from ..integration.cluster import start_broker
from ..integration.processes import ServerProcess, start_server
from ..polling import eventually_async
from ..tls_certs import make_ca
from .control_plane import ControlPlane
from .operator_support import Resources, crds, eventually, namespace, resources, running_operator
from .test_operator_dead_letter_jobs import GROUP_NAME, LOCAL_SPARK, read, run_command

__all__ = ["crds", "namespace", "resources"]

PLACEHOLDER_ACL = """\
[[accounts]]
access_key = "placeholder"
secret_key = "placeholder-secret"
admin = true
"""


class Kubelet:
    """Copies Secrets into directories as a Secret volume holds them, every 0.1 s."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, root: Path) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.namespace = namespace
        self.root = root
        self.mounts: dict[str, Path] = {}
        self.versions: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def mount(self, secret: str) -> Path:
        directory = self.root / secret
        directory.mkdir(parents=True, exist_ok=True)
        self.mounts[secret] = directory
        return directory

    def _sync(self, secret: str, directory: Path) -> None:
        try:
            found = self.core.read_namespaced_secret(secret, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        version = found.metadata.resource_version
        if self.versions.get(secret) == version:
            return
        data = directory / f"..{version}"
        data.mkdir()
        for key, value in (found.data or {}).items():
            (data / key).write_bytes(base64.b64decode(value))
        link = directory / "..data_tmp"
        link.symlink_to(data.name)
        link.replace(directory / "..data")
        for key in found.data or {}:
            if not (directory / key).is_symlink():
                (directory / key).unlink(missing_ok=True)  # a file written before the mount
                (directory / key).symlink_to(f"..data/{key}")
        self.versions[secret] = version

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for secret, directory in list(self.mounts.items()):
                self._sync(secret, directory)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)


def secret_keys(core: kubernetes.client.CoreV1Api, ns: str, name: str) -> dict[str, str]:
    found = core.read_namespaced_secret(name, ns)
    return {key: base64.b64decode(value).decode() for key, value in (found.data or {}).items()}


def send(namesrv: str, credentials: Credentials | None, topic: str) -> str:
    """ "sent", or the refusal's text."""

    async def go() -> str:
        async with Producer([namesrv], credentials=credentials) as producer:
            try:
                await producer.send(Message(topic, b"x"))
            except RemotingError as exc:
                return str(exc)
        return "sent"

    return asyncio.run(go())


def create_topic(namesrv: str, admin: Credentials, topic: str) -> None:
    async def go() -> None:
        async with AdminClient([namesrv], credentials=admin) as client:
            await client.create_topic(topic, queues=2, cluster="orders")

    asyncio.run(go())


@contextmanager
def secured_cluster(
    resources: Resources, api: kubernetes.client.ApiClient, control_plane: ControlPlane, root: Path
) -> Iterator[tuple[ServerProcess, Kubelet]]:
    """The operator, a BrokerCluster ``orders`` of one broker with access control on, and the
    name server and broker its pods would run, enforcing its ACL."""
    ns = resources.namespace
    acl_dir = root / "mounts" / "orders-acl"
    acl_dir.mkdir(parents=True)
    (acl_dir / "acl.toml").write_text(PLACEHOLDER_ACL)
    namesrv = start_server(
        "namesrv", "--listen", "127.0.0.1:0", "--acl-file", str(acl_dir / "acl.toml")
    )
    broker: ServerProcess | None = None
    try:
        with (
            Kubelet(api, ns, root / "mounts") as kubelet,
            running_operator(ns, control_plane, name_server_template=namesrv.address),
        ):
            kubelet.mount("orders-acl")
            credentials = kubelet.mount("orders-admin")
            resources.create(
                "brokerclusters", "orders", {"brokers": 1, "accessControl": {"enabled": True}}
            )
            eventually(lambda: (credentials / "accessKey").exists(), 30, "the admin Secret")
            eventually(
                lambda: (
                    "admin = true" in (acl_dir / "acl.toml").read_text()
                    and "placeholder" not in (acl_dir / "acl.toml").read_text()
                ),
                30,
                "the ACL Secret",
            )
            broker = start_broker(
                namesrv.address, "orders-broker-0", root / "broker", cluster="orders",
                extra=("--acl-file", str(acl_dir / "acl.toml"), "--register-interval-s", "1"),
                env={"RECONSUME_CREDENTIALS_DIR": str(credentials)},
            )  # fmt: skip
            resources.wait_condition("brokerclusters", "orders", "True", "Running", timeout_s=60)
            yield namesrv, kubelet
    finally:
        if broker is not None:
            broker.kill()
        namesrv.kill()


def test_a_user_gets_a_key_its_permissions_a_rotation_and_a_revocation(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    ns = resources.namespace
    core = kubernetes.client.CoreV1Api(api)
    with secured_cluster(resources, api, control_plane, tmp_path) as (namesrv, _kubelet):
        admin_keys = secret_keys(core, ns, "orders-admin")
        admin = Credentials(admin_keys["accessKey"], admin_keys["secretKey"])
        cluster = resources.get("brokerclusters", "orders") or {}
        access = cluster["status"]["accessControl"]
        assert access["enabled"] is True
        assert access["adminSecret"] == "orders-admin"
        assert access["aclSecret"] == "orders-acl"
        assert access["accounts"] == 1
        for topic in ("orders", "audit"):
            create_topic(namesrv.address, admin, topic)
        unsigned = send(namesrv.address, None, "orders")
        assert "carries no AccessKey" in unsigned, unsigned

        resources.create(
            "users",
            "shop",
            {"cluster": "orders", "topics": [{"name": "orders", "perm": "PUB"}]},
        )
        resources.wait_condition("users", "shop", "True", "Applied", timeout_s=30)
        user = resources.get("users", "shop") or {}
        keys = secret_keys(core, ns, "shop")
        shop = Credentials(keys["accessKey"], keys["secretKey"])
        assert user["status"]["accessKey"] == shop.access_key
        assert user["status"]["secretName"] == "shop"
        assert [b["name"] for b in user["status"]["brokers"]] == ["orders-broker-0"]
        assert "secretKey" not in str(user["status"])
        assert shop.secret_key not in str(user)
        assert send(namesrv.address, shop, "orders") == "sent"
        refused = send(namesrv.address, shop, "audit")
        assert f"{shop.access_key} has no PUB on topic audit" in refused, refused

        # A Topic names the User as a producer: the grant reaches the broker.
        resources.create("topics", "audit", {"cluster": "orders", "producers": ["shop"]})
        eventually(lambda: send(namesrv.address, shop, "audit") == "sent", 20, "the grant")

        # Rotation: a new key; the old one keeps working for the window.
        resources.patch("users", "shop", {"spec": {"rotation": {"token": "2026-11"}}})
        eventually(
            lambda: secret_keys(core, ns, "shop")["accessKey"] != shop.access_key,
            20,
            "a new key",
        )
        rotated = secret_keys(core, ns, "shop")
        fresh = Credentials(rotated["accessKey"], rotated["secretKey"])
        assert rotated["previousAccessKey"] == shop.access_key
        eventually(lambda: send(namesrv.address, fresh, "orders") == "sent", 20, "the new key")
        assert send(namesrv.address, shop, "orders") == "sent"

        # The status is patched when the reconcile that wrote the Secret ends.
        def rotated_status() -> dict[str, Any] | None:
            status: dict[str, Any] = (resources.get("users", "shop") or {}).get("status", {})
            return status if status.get("previousAccessKey") else None

        status = eventually(rotated_status, 20, "the previous key in the User's status")
        assert status["previousAccessKey"] == shop.access_key
        assert status["previousExpiresAt"]

        # Deletion revokes both keys on the broker; measured from the delete call.
        started = time.monotonic()
        resources.delete("users", "shop")
        eventually(
            lambda: "(code 16)" in send(namesrv.address, fresh, "orders"),
            20,
            "the revocation",
        )
        revoked_s = time.monotonic() - started
        assert send(namesrv.address, shop, "orders") != "sent"
        eventually(lambda: resources.get("users", "shop") is None, 20, "the User gone")
        # Measured here at about 1 s (the broker reads the file within 1 s of its change).
        assert revoked_s < 10, f"the revocation took {revoked_s:.1f} s"


def test_an_adopted_secret_is_used_as_it_is_and_left_on_deletion(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    ns = resources.namespace
    core = kubernetes.client.CoreV1Api(api)
    keys = {"accessKey": "team-billing", "secretKey": "billing-secret-key-1"}
    core.create_namespaced_secret(
        ns,
        kubernetes.client.V1Secret(
            metadata=kubernetes.client.V1ObjectMeta(name="billing-keys"), string_data=keys
        ),
    )
    with secured_cluster(resources, api, control_plane, tmp_path) as (namesrv, _kubelet):
        admin_keys = secret_keys(core, ns, "orders-admin")
        create_topic(
            namesrv.address,
            Credentials(admin_keys["accessKey"], admin_keys["secretKey"]),
            "invoices",
        )
        spec: dict[str, Any] = {
            "cluster": "orders",
            "secretName": "billing-keys",
            "defaultTopicPerm": "PUB|SUB",
            "rotation": {"token": "ignored"},
        }
        resources.create("users", "billing", spec)
        resources.wait_condition("users", "billing", "True", "Applied", timeout_s=30)
        billing = Credentials("team-billing", "billing-secret-key-1")
        assert send(namesrv.address, billing, "invoices") == "sent"
        assert secret_keys(core, ns, "billing-keys") == keys  # never rewritten
        resources.delete("users", "billing")
        eventually(lambda: send(namesrv.address, billing, "invoices") != "sent", 20, "revoked")
        assert secret_keys(core, ns, "billing-keys") == keys


def test_a_user_of_a_cluster_without_access_control_says_so(
    resources: Resources, control_plane: ControlPlane
) -> None:
    with running_operator(resources.namespace, control_plane):
        resources.create("users", "lonely", {"cluster": "nowhere"})
        condition = resources.wait_condition("users", "lonely", "False", "ClusterNotSecured")
        assert "BrokerCluster nowhere" in condition["message"]


def test_an_external_cluster_is_reached_over_tls_with_its_secrets_ca_and_credentials(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """The operator trusts the CA of ``spec.tls.secretName``, presents its certificate where
    the servers require one, and signs with ``spec.accessControl.adminSecret``."""
    ns = resources.namespace
    core = kubernetes.client.CoreV1Api(api)
    ca = make_ca(tmp_path / "ca")
    pem = {
        "ca.crt": ca.ca_file.read_text(),
        "tls.crt": ca.client.cert_file.read_text(),
        "tls.key": ca.client.key_file.read_text(),
    }
    keys = {"accessKey": "operator-admin", "secretKey": "operator-admin-secret"}
    for name, data in (("ext-tls", pem), ("ext-admin", keys)):
        core.create_namespaced_secret(
            ns,
            kubernetes.client.V1Secret(
                metadata=kubernetes.client.V1ObjectMeta(name=name), string_data=data
            ),
        )
    acl = tmp_path / "acl.toml"
    acl.write_text(
        '[[accounts]]\naccess_key = "operator-admin"\nsecret_key = "operator-admin-secret"\n'
        "admin = true\n"
    )
    tls = (
        "--tls-mode", "enforcing", "--tls-cert-file", str(ca.server.cert_file),
        "--tls-key-file", str(ca.server.key_file), "--tls-ca-file", str(ca.ca_file),
        "--tls-client-auth", "required", "--acl-file", str(acl),
    )  # fmt: skip
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *tls)
    broker: ServerProcess | None = None
    try:
        broker = start_broker(
            namesrv.address, "ext-broker", tmp_path / "broker", cluster="ext",
            extra=(*tls, "--register-interval-s", "1"),
            env={
                "RECONSUME_TLS": "true", "RECONSUME_TLS_CA_FILE": str(ca.ca_file),
                "RECONSUME_TLS_CERT_FILE": str(ca.client.cert_file),
                "RECONSUME_TLS_KEY_FILE": str(ca.client.key_file),
                "RECONSUME_ACCESS_KEY": "operator-admin",
                "RECONSUME_SECRET_KEY": "operator-admin-secret",
            },
        )  # fmt: skip
        spec = {
            "external": {"nameServer": namesrv.address, "clusterName": "ext"},
            "accessControl": {"enabled": True, "adminSecret": "ext-admin"},
            "tls": {"secretName": "ext-tls", "clientAuth": "Required"},
        }
        with running_operator(ns, control_plane):
            resources.create("brokerclusters", "ext", spec)
            resources.wait_condition("brokerclusters", "ext", "True", "Running", timeout_s=30)
            status = (resources.get("brokerclusters", "ext") or {})["status"]
            assert status["accessControl"] == {"enabled": True, "adminSecret": "ext-admin"}
            assert [b["name"] for b in status["brokers"]] == ["ext-broker"]
            resources.create("topics", "tls-orders", {"cluster": "ext"})
            resources.wait_condition("topics", "tls-orders", "True", timeout_s=30)
    finally:
        if broker is not None:
            broker.kill()
        namesrv.kill()


async def fill_dead_letters(namesrv: str, admin: Credentials, count: int) -> None:
    """``count`` messages to ``orders``, each failed once by GID_orders (0 reconsume times):
    every one ends in %DLQ%GID_orders."""

    async def fail(batch: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        return ConsumeStatus.RECONSUME_LATER

    async with AdminClient([namesrv], credentials=admin) as client:
        async with Producer([namesrv], credentials=admin) as producer:
            for i in range(count):
                await producer.send(Message("orders", f"order-{i}".encode()))
        settings = ConsumerSettings(instance_name="failing", max_reconsume_times=0)
        consumer = PushConsumer([namesrv], GROUP_NAME, settings=settings, credentials=admin)
        consumer.subscribe("orders")
        consumer.register_listener(fail)
        await consumer.start()
        try:

            async def all_dead() -> bool:
                return await client.topic_depth(dead_letter_topic(GROUP_NAME)) == count

            await eventually_async(all_dead, 60, "every message dead-lettered")
        finally:
            await consumer.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_dead_letter_job_runs_with_an_account_limited_to_its_group(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's keys are generated into ``<job>-credentials`` and mounted into its pod; the
    account may read and re-send the group's dead letters (the ledger topic made for it by
    the operator) and nothing else."""
    ns = resources.namespace
    core = kubernetes.client.CoreV1Api(api)
    batch = kubernetes.client.BatchV1Api(api)
    with secured_cluster(resources, api, control_plane, tmp_path) as (namesrv, kubelet):
        admin_keys = secret_keys(core, ns, "orders-admin")
        for topic in ("orders", "audit"):
            create_topic(
                namesrv.address,
                Credentials(admin_keys["accessKey"], admin_keys["secretKey"]),
                topic,
            )
        group = {
            "cluster": "orders",
            "groupName": GROUP_NAME,
            "subscriptions": [{"topic": "orders"}],
        }
        resources.create("consumergroups", "orders-consumer", group)
        resources.wait_condition("consumergroups", "orders-consumer", "True", "Reconciled")
        admin = Credentials(admin_keys["accessKey"], admin_keys["secretKey"])
        asyncio.run(fill_dead_letters(namesrv.address, admin, 6))

        body = {
            "apiVersion": "reconsume.io/v1alpha1",
            "kind": "DeadLetterJob",
            "metadata": {"name": "replay"},
            "spec": {
                "consumerGroup": "orders-consumer",
                "action": "Reprocess",
                "spark": LOCAL_SPARK,
            },
        }
        resources.custom.create_namespaced_custom_object(
            "reconsume.io", "v1alpha1", ns, "deadletterjobs", body
        )
        job = eventually(lambda: read(batch.read_namespaced_job, "replay-1", ns), 60, "the Job")
        pod = job.spec.template.spec
        assert pod.volumes[0].secret.secret_name == "replay-credentials"
        container = pod.containers[0]
        assert {e.name: e.value for e in container.env or ()}["RECONSUME_CREDENTIALS_DIR"] == (
            "/var/run/reconsume/credentials"
        )
        keys = secret_keys(core, ns, "replay-credentials")
        account = Credentials(keys["accessKey"], keys["secretKey"])
        assert account.access_key.startswith("dlj-replay-")
        refused = send(namesrv.address, account, "audit")
        assert f"{account.access_key} has no PUB on topic audit" in refused, refused

        mounted = kubelet.mount("replay-credentials")
        eventually(lambda: (mounted / "accessKey").exists(), 10, "the run's keys mounted")
        monkeypatch.setenv("RECONSUME_CREDENTIALS_DIR", str(mounted))
        command = list(container.command)  # as the pod runs it, at the local name server
        command[command.index("--name-server") + 1] = namesrv.address
        code, message = run_command(command, tmp_path)
        result = json.loads(message)
        assert (code, result["phase"]) == (0, "Succeeded"), result.get("message")
        assert result["counts"]["resent"] == 6


def test_a_rotation_under_load_fails_no_send_and_loses_nothing(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """A producer signing with the User's mounted Secret (``CredentialFiles``) sends all along
    while ``spec.rotation.token`` changes and the window (2 s) ends: it picks the new key up
    from the files, every send succeeds, every message is stored, and the old key is refused
    once the window is over."""
    ns = resources.namespace
    core = kubernetes.client.CoreV1Api(api)
    with secured_cluster(resources, api, control_plane, tmp_path) as (namesrv, kubelet):
        admin_keys = secret_keys(core, ns, "orders-admin")
        admin = Credentials(admin_keys["accessKey"], admin_keys["secretKey"])
        create_topic(namesrv.address, admin, "orders")
        spec = {
            "cluster": "orders",
            "topics": [{"name": "orders", "perm": "PUB"}],
            "rotation": {"token": "1", "windowSeconds": 2},
        }
        resources.create("users", "shop", spec)
        resources.wait_condition("users", "shop", "True", "Applied", timeout_s=30)
        mounted = kubelet.mount("shop")
        eventually(lambda: (mounted / "secretKey").exists(), 10, "the User's keys mounted")
        files = CredentialFiles(mounted, check_interval_s=0.1)
        old = files.credentials
        sent: list[str] = []
        failures: list[str] = []

        async def produce(done: asyncio.Event) -> None:
            async with Producer([namesrv.address], credentials=files) as producer:
                while not done.is_set():
                    body = f"rotation-{len(sent)}"
                    try:
                        await producer.send(Message("orders", body.encode()))
                    except ReconsumeError as exc:
                        failures.append(str(exc))
                        continue
                    sent.append(body)

        async def rotate(done: asyncio.Event) -> None:
            try:
                await eventually_async(lambda: len(sent) >= 50, 20, "sends before the rotation")
                resources.patch("users", "shop", {"spec": {"rotation": {"token": "2"}}})
                await eventually_async(
                    lambda: files.credentials.access_key != old.access_key, 20, "the new key used"
                )
                mark = len(sent)
                await eventually_async(lambda: len(sent) >= mark + 50, 20, "sends afterwards")
            finally:
                done.set()

        async def run() -> None:
            done = asyncio.Event()
            await asyncio.gather(produce(done), rotate(done))

        asyncio.run(run())
        assert not failures, failures[:3]

        async def stored() -> int:
            async with AdminClient([namesrv.address], credentials=admin) as client:
                return await client.topic_depth("orders")

        assert asyncio.run(stored()) == len(sent)
        eventually(lambda: "(code 16)" in send(namesrv.address, old, "orders"), 20, "old key out")


def test_a_topic_handler_first_makes_the_clusters_admin_secret_itself(
    resources: Resources, control_plane: ControlPlane, api: kubernetes.client.ApiClient
) -> None:
    """A Topic's or ConsumerGroup's pass may come before its new cluster's first pass (seen on
    the node tier: the group reported the admin Secret missing): it creates the Secret itself,
    owned by the cluster, as the cluster's pass would, and signs with it."""
    ns = resources.namespace
    resources.create("brokerclusters", "orders", {"brokers": 1})  # no operator running
    body = resources.get("brokerclusters", "orders") or {}
    ctx = OperatorContext(OperatorConfig(), ChildWriter(control_plane.configuration()))
    try:
        asyncio.run(ensure_credentials(ctx, cluster_spec(body), "ns-address:9876"))
    finally:
        ctx.close()
    keys = secret_keys(kubernetes.client.CoreV1Api(api), ns, "orders-admin")
    assert ctx.credentials["ns-address:9876"].access_key == keys["accessKey"]
    secret = kubernetes.client.CoreV1Api(api).read_namespaced_secret("orders-admin", ns)
    (owner,) = secret.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == (
        "BrokerCluster",
        "orders",
        body["metadata"]["uid"],
    )
