"""A BrokerCluster with replicas on a real API server: the operator creates a StatefulSet per
replica, each broker's Lease and master Service (with its empty EndpointSlice), the Role that
lets the brokers use exactly those and a budget per broker; brokers running as its
ServiceAccount elect through the Leases, the status and the MASTERS column name the master pod,
and fewer replicas delete what they no longer need.

Nothing runs pods here: the brokers are local processes named as the pods' brokers
(``orders-broker-0``, broker ids 0 and 1), logged in with a token of the ServiceAccount the
operator made."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException

from ..integration.cluster import start_broker
from ..integration.processes import ServerProcess, start_server
from .control_plane import ControlPlane
from .operator_support import Resources, crds, eventually, namespace, resources, running_operator
from .test_broker_lease import kubectl, service_account_token

__all__ = ["crds", "kubectl", "namespace", "resources"]

BROKER = "orders-broker-0"
MASTER_SERVICE = f"{BROKER}-master"
LEASE_MS = 2000


def exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def start_pod_broker(
    namesrv: ServerProcess, control_plane: ControlPlane, ns: str, token: Path, replica: int
) -> ServerProcess:
    """What pod ``replica`` of broker 0 runs (docs/operator.md), as a local process."""
    return start_broker(
        namesrv.address, BROKER, token.parent / f"replica-{replica}", cluster="orders",
        extra=("--election", f"kube:{ns}/{BROKER}", "--broker-id", str(replica),
               "--replication", "Sync", "--replicas", "2",
               "--kube-api", control_plane.server, "--kube-token-file", str(token),
               "--kube-ca-file", str(control_plane.credentials.ca_cert),
               "--lease-duration-ms", str(LEASE_MS), "--replica-lag-max-ms", "1000",
               "--register-interval-s", "1"),
    )  # fmt: skip


def test_replicas_elect_through_the_leases_the_operator_made(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    kubectl: Callable[..., str],
    tmp_path: Path,
) -> None:
    ns = resources.namespace
    apps = kubernetes.client.AppsV1Api(api)
    core = kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    policy = kubernetes.client.PolicyV1Api(api)
    leases = kubernetes.client.CoordinationV1Api(api)
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers: dict[int, ServerProcess] = {}

    def read_slice() -> dict[str, Any]:
        # raw: the client's model refuses a slice without endpoints (the API server omits [])
        found = kubernetes.client.DiscoveryV1Api(api).read_namespaced_endpoint_slice(
            MASTER_SERVICE, ns, _preload_content=False
        )
        document: dict[str, Any] = json.loads(found.data)
        return document

    def broker_status() -> dict[str, Any]:
        body = resources.get("brokerclusters", "orders") or {}
        found = ((body.get("status") or {}).get("brokers")) or [{}]
        entry: dict[str, Any] = found[0]
        return entry

    try:
        with running_operator(ns, control_plane, name_server_template=namesrv.address):
            resources.create("brokerclusters", "orders", {"brokers": 1, "replicas": 2})
            eventually(
                lambda: exists(lambda: policy.read_namespaced_pod_disruption_budget(BROKER, ns)),
                30,
                "the children",
            )
            first = apps.read_namespaced_stateful_set("orders-broker", ns)
            second = apps.read_namespaced_stateful_set("orders-broker-r1", ns)
            assert first.spec.update_strategy.type == "OnDelete"
            assert second.spec.replicas == 1
            assert second.spec.template.spec.service_account_name == "orders-broker"
            lease = leases.read_namespaced_lease(BROKER, ns)
            assert lease.spec.holder_identity is None
            assert lease.metadata.owner_references[0].kind == "BrokerCluster"
            budget = policy.read_namespaced_pod_disruption_budget(BROKER, ns)
            assert budget.spec.selector.match_labels["apps.kubernetes.io/pod-index"] == "0"
            master_service = core.read_namespaced_service(MASTER_SERVICE, ns)
            assert master_service.spec.selector is None
            assert master_service.spec.cluster_ip
            assert master_service.metadata.owner_references[0].kind == "BrokerCluster"
            empty = read_slice()  # created empty: the broker's master fills it in
            assert not empty.get("endpoints")
            assert empty["metadata"]["ownerReferences"][0]["kind"] == "BrokerCluster"
            assert master_service.spec.ip_families == ["IPv4"]  # the cluster's first family
            assert empty["addressType"] == "IPv4"  # the Service's
            assert not exists(
                lambda: policy.read_namespaced_pod_disruption_budget("orders-broker", ns)
            )

            # The brokers use the operator's ServiceAccount and Role: get and update only.
            token = service_account_token(
                api, control_plane, ns, "orders-broker", [], tmp_path / "token", create=False
            )
            for replica in (0, 1):
                brokers[replica] = start_pod_broker(namesrv, control_plane, ns, token, replica)
            eventually(
                lambda: (
                    broker_status().get("master") == "orders-broker-0"
                    and broker_status().get("inSync") == ["orders-broker-r1-0"]
                ),
                30,
                "orders-broker-0 master, its replica in sync",
            )
            header, row = kubectl("get", "rbc", "orders", "-n", ns).splitlines()
            assert header.split()[:4] == ["NAME", "READY", "PHASE", "BROKERS"]
            assert "MASTERS" in header.split()
            assert "orders-broker-0" in row.split()
            assert (resources.get("brokerclusters", "orders") or {})["status"]["masters"] == (
                "orders-broker-0"
            )

            brokers[0].kill()
            eventually(
                lambda: broker_status().get("master") == "orders-broker-r1-0", 30, "failover"
            )
            assert broker_status()["epoch"] == 2
            brokers[0] = start_pod_broker(namesrv, control_plane, ns, token, 0)
            eventually(lambda: broker_status().get("inSync") == ["orders-broker-0"], 30, "rejoined")

            # One replica: what only replicas need goes.
            resources.patch("brokerclusters", "orders", {"spec": {"replicas": 1}})
            gone = [
                lambda: apps.read_namespaced_stateful_set("orders-broker-r1", ns),
                lambda: rbac.read_namespaced_role("orders-broker-leases", ns),
                lambda: rbac.read_namespaced_role_binding("orders-broker-leases", ns),
                lambda: core.read_namespaced_service_account("orders-broker", ns),
                lambda: leases.read_namespaced_lease(BROKER, ns),
                lambda: policy.read_namespaced_pod_disruption_budget(BROKER, ns),
                lambda: core.read_namespaced_service(MASTER_SERVICE, ns),
                read_slice,
            ]
            eventually(lambda: not any(exists(read) for read in gone), 30, "pruned")
            assert exists(lambda: policy.read_namespaced_pod_disruption_budget("orders-broker", ns))
            first = apps.read_namespaced_stateful_set("orders-broker", ns)
            assert first.spec.update_strategy.type == "RollingUpdate"
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()


def test_replicas_added_to_a_running_cluster_wait_for_its_first_pods(
    resources: Resources, api: kubernetes.client.ApiClient, control_plane: ControlPlane
) -> None:
    """A cluster that gains replicas keeps the replica StatefulSet at 0 pods while its first
    pods still run without the election (here: forever, no controller updates them)."""
    ns = resources.namespace
    apps = kubernetes.client.AppsV1Api(api)
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    try:
        with running_operator(ns, control_plane, name_server_template=namesrv.address):
            resources.create("brokerclusters", "orders", {"brokers": 2})
            eventually(
                lambda: exists(lambda: apps.read_namespaced_stateful_set("orders-broker", ns)),
                30,
                "the brokers' StatefulSet",
            )
            resources.patch("brokerclusters", "orders", {"spec": {"replicas": 2}})
            eventually(
                lambda: exists(lambda: apps.read_namespaced_stateful_set("orders-broker-r1", ns)),
                30,
                "the replicas' StatefulSet",
            )
            first = apps.read_namespaced_stateful_set("orders-broker", ns)
            assert first.spec.update_strategy.type == "OnDelete"
            assert first.spec.replicas == 2
            second = apps.read_namespaced_stateful_set("orders-broker-r1", ns)
            assert second.spec.replicas == 0
    finally:
        namesrv.stop()


def test_the_status_follows_a_failover_without_waiting_for_a_drift_pass(
    resources: Resources,
    api: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """The operator watches the brokers' Leases: with drift passes ten minutes apart, the
    status and the MASTERS column name the new master within seconds of a failover."""
    ns = resources.namespace
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers: dict[int, ServerProcess] = {}

    def status() -> dict[str, Any]:
        found: dict[str, Any] = (resources.get("brokerclusters", "orders") or {}).get(
            "status"
        ) or {}
        return found

    def entry() -> dict[str, Any]:
        found: dict[str, Any] = (status().get("brokers") or [{}])[0]
        return found

    try:
        with running_operator(
            ns, control_plane, name_server_template=namesrv.address, drift_s=600.0
        ):
            resources.create("brokerclusters", "orders", {"brokers": 1, "replicas": 2})
            leases = kubernetes.client.CoordinationV1Api(api)
            policy = kubernetes.client.PolicyV1Api(api)
            eventually(  # the budgets are the last of the children
                lambda: exists(lambda: policy.read_namespaced_pod_disruption_budget(BROKER, ns)),
                30,
                "the children",
            )
            token = service_account_token(
                api, control_plane, ns, "orders-broker", [], tmp_path / "token", create=False
            )
            for replica in (0, 1):
                brokers[replica] = start_pod_broker(namesrv, control_plane, ns, token, replica)

            def elected() -> bool:
                lease = leases.read_namespaced_lease(BROKER, ns)
                return lease.spec.holder_identity == f"{BROKER}-0"

            eventually(elected, 30, "orders-broker-0 elected")
            # a pass writes the brokers' entries (the one at creation found no broker yet)
            resources.patch("brokerclusters", "orders", {"spec": {"retentionHours": 48}})
            eventually(lambda: entry().get("master") == "orders-broker-0", 30, "the first pass")

            brokers[0].kill()
            killed = time.monotonic()
            eventually(
                lambda: entry().get("master") == "orders-broker-r1-0",
                20,
                "the status naming the new master",
            )
            followed_s = time.monotonic() - killed
            assert status()["masters"] == "orders-broker-r1-0"
            assert entry()["epoch"] == 2
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()
    # printed out here: the operator's runner holds stdout while it runs
    print(f"the status named the new master {followed_s:.2f} s after the kill")
    # the lease takes LEASE_MS to expire, then the status follows it, not a drift pass
    assert followed_s < 10.0
