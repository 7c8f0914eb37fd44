"""The election's lease as a Kubernetes Lease, without an API server: the record <-> Lease
mapping both ways (annotations missing too), the election spec and its settings, the answers
of the API server as the election sees them (a fake API), and a request that gets no answer."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconsume.broker.election import Elector
from reconsume.broker.kube_api import KubeAccessError, KubeApi, KubeApiError, KubeCredentials
from reconsume.broker.kube_lease import (
    KubeLeaseStore,
    kube_lease_store,
    lease_object,
    micro_time,
    parse_kube_election,
    record_of,
)
from reconsume.broker.lease import LeaseConflict, LeaseRecord
from reconsume.broker.settings import BrokerSettings
from reconsume.errors import InvalidArgumentError

NOW = datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
RECORD = LeaseRecord(
    holder="broker-a-1",
    address="10.0.0.7:10911",
    epoch=4,
    in_sync=("broker-a-0", "broker-a-2"),
    duration_s=1.5,
    version="812",
)


def stored(lease: dict[str, Any], version: str) -> dict[str, Any]:
    """``lease`` as the API server answers it: with its new resourceVersion."""
    return {**lease, "metadata": {**lease["metadata"], "resourceVersion": version}}


def test_a_record_becomes_a_lease_and_back() -> None:
    lease = lease_object(RECORD, "prod", "broker-a", NOW)
    assert lease == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "broker-a",
            "namespace": "prod",
            "annotations": {
                "reconsume.io/master-address": "10.0.0.7:10911",
                "reconsume.io/in-sync": "broker-a-0,broker-a-2",
                "reconsume.io/lease-duration-ms": "1500",
            },
        },
        "spec": {
            "holderIdentity": "broker-a-1",
            "leaseTransitions": 4,
            "leaseDurationSeconds": 2,
            "renewTime": "2025-03-04T05:06:07.890123Z",
            "acquireTime": "2025-03-04T05:06:07.890123Z",
        },
    }
    assert record_of(stored(lease, "812")) == RECORD


def test_a_lease_without_annotations_gives_no_address_nobody_in_sync_and_its_seconds() -> None:
    lease = {
        "metadata": {"name": "broker-a", "resourceVersion": "5"},
        "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 15, "leaseTransitions": 2},
    }
    assert record_of(lease) == LeaseRecord("someone", None, 2, (), 15.0, "5")
    bare = record_of({"metadata": {"resourceVersion": "6"}, "spec": {}})
    assert bare == LeaseRecord(None, None, 0, version="6")
    odd = {"metadata": {"annotations": {"reconsume.io/lease-duration-ms": "soon"}}, "spec": {}}
    assert record_of(odd).duration_s == LeaseRecord(None, None, 0).duration_s


def test_a_released_lease_has_no_holder_address_or_in_sync_set() -> None:
    released = LeaseRecord(None, None, 3, duration_s=3.0)
    lease = lease_object(released, "prod", "broker-a", NOW)
    assert "holderIdentity" not in lease["spec"]
    assert "acquireTime" not in lease["spec"]
    assert lease["metadata"]["annotations"] == {"reconsume.io/lease-duration-ms": "3000"}
    assert lease["spec"]["leaseDurationSeconds"] == 3
    assert record_of(stored(lease, "9")) == LeaseRecord(None, None, 3, (), 3.0, "9")


def test_a_renewal_keeps_the_acquire_time_and_other_metadata_a_new_holder_resets_it() -> None:
    first = stored(lease_object(RECORD, "prod", "broker-a", NOW), "812")
    first["metadata"]["labels"] = {"app": "reconsume"}
    first["metadata"]["annotations"]["team"] = "orders"
    later = datetime(2025, 3, 4, 5, 6, 9, tzinfo=UTC)
    renewed = lease_object(RECORD, "prod", "broker-a", later, first)
    assert renewed["spec"]["acquireTime"] == "2025-03-04T05:06:07.890123Z"
    assert renewed["spec"]["renewTime"] == "2025-03-04T05:06:09.000000Z"
    assert renewed["metadata"]["labels"] == {"app": "reconsume"}
    assert renewed["metadata"]["resourceVersion"] == "812"
    assert renewed["metadata"]["annotations"]["team"] == "orders"
    shrunk = lease_object(RECORD.taken_by("broker-a-2", "10.0.0.8:10911"), "p", "b", later, first)
    assert shrunk["spec"]["acquireTime"] == "2025-03-04T05:06:09.000000Z"
    assert "reconsume.io/in-sync" not in shrunk["metadata"]["annotations"]  # nobody yet
    assert shrunk["spec"]["leaseTransitions"] == 5


def test_micro_time_is_utc_with_microseconds() -> None:
    assert micro_time(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05.000000Z"


@pytest.mark.parametrize(
    ("where", "parsed"),
    [("broker-a", (None, "broker-a")), ("prod/broker-a", ("prod", "broker-a")),
     ("prod/orders.broker-a", ("prod", "orders.broker-a"))],
)  # fmt: skip
def test_the_election_spec_names_a_lease_and_maybe_its_namespace(
    where: str, parsed: tuple[str | None, str]
) -> None:
    assert parse_kube_election(where) == parsed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"election": "kube:"}, "setting election: 'kube:' is not file:PATH, kube:NAME"),
        ({"election": "kube:Broker_A"}, "'Broker_A' is not a DNS subdomain"),
        ({"election": "kube:prod/"}, "kube:prod/ names no lease"),
        ({"election": "kube:Prod/broker-a"}, "'Prod' is not a DNS label"),
        ({"election": "kube:a/b/c"}, "'a/b' is not a DNS label"),
        ({"election": "kube:" + "a" * 254}, "is not a DNS subdomain"),
        ({"election": "zk:x"}, "is not file:PATH, kube:NAME or kube:NAMESPACE/NAME"),
        ({"kube_api": "https://k:6443"}, "setting kube_api: only with a Kubernetes Lease"),
        ({"election": "file:l", "kube_ca_file": "ca"}, "setting kube_ca_file: only with"),
        ({"election": "kube:b", "kube_api": "http://k:80"}, "is not https://HOST[:PORT]"),
        ({"election": "kube:b", "kube_api": "https://k:x"}, "setting kube_api: 'https://k:x'"),
        ({"election": "kube:b", "kube_token_file": ""}, "kube_token_file: must not be empty"),
    ],
)
def test_wrong_kube_settings_are_refused_naming_the_setting(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        BrokerSettings(store_dir="s", **changes)
    assert message in str(refused.value)


def test_credentials_default_to_the_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    pod = KubeCredentials.resolve()
    assert (pod.host, pod.port) == ("fd00::1", 6443)
    assert str(pod.token_file) == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    given = KubeCredentials.resolve("https://api.example:8443", "/t", "/ca")
    assert (given.host, given.port, str(given.token_file), str(given.ca_file)) == (
        "api.example",
        8443,
        "/t",
        "/ca",
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(KubeApiError, match="not in a pod"):
        KubeCredentials.resolve()


def test_outside_a_pod_a_lease_without_namespace_is_refused_clearly() -> None:
    with pytest.raises(KubeApiError, match="give kube:NAMESPACE/broker-a"):
        kube_lease_store(
            "broker-a", api="https://k:6443", token_file="t", ca_file=None, timeout_s=1
        )


class FakeApi(KubeApi):
    """Answers from a list, recording the requests."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        super().__init__(KubeCredentials("k", 6443, Path("t"), None), 1.0)
        self.answers = answers
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        self.requests.append((method, path, body))
        return self.answers.pop(0)


PATH = "/apis/coordination.k8s.io/v1/namespaces/prod/leases"


def test_the_store_reads_creates_and_replaces_by_resource_version() -> None:
    created = stored(lease_object(RECORD, "prod", "broker-a", NOW), "100")
    renewed = stored(created, "101")
    api = FakeApi([(404, {"reason": "NotFound"}), (201, created), (200, created), (200, renewed)])
    store = KubeLeaseStore(api, "prod", "broker-a")

    async def scenario() -> None:
        assert await store.read() is None
        assert (await store.write(RECORD, None)).version == "100"
        assert (await store.read()) == LeaseRecord(**{**_fields(RECORD), "version": "100"})
        assert (await store.write(RECORD, "100")).version == "101"

    asyncio.run(scenario())
    methods = [(method, path) for method, path, _body in api.requests]
    assert methods == [
        ("GET", f"{PATH}/broker-a"),
        ("POST", PATH),
        ("GET", f"{PATH}/broker-a"),
        ("PUT", f"{PATH}/broker-a"),
    ]
    put = api.requests[-1][2]
    assert put is not None
    assert put["metadata"]["resourceVersion"] == "100"


def _fields(record: LeaseRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in LeaseRecord.__slots__}


@pytest.mark.parametrize(
    ("status", "expected", "raised", "message"),
    [
        (409, None, LeaseConflict, "exists already"),
        (409, "7", LeaseConflict, "changed since version 7"),
        (404, "7", LeaseConflict, "gone since version 7"),
        (403, "7", KubeAccessError, "needs get, create and update on leases in namespace prod"),
        (401, None, KubeAccessError, "refused (401): Unauthorized"),
        (500, "7", KubeApiError, "update Lease prod/broker-a: failed (500): etcd is down"),
        (422, None, KubeApiError, "create Lease prod/broker-a: failed (422)"),
    ],
)
def test_refused_writes_are_conflicts_or_clear_errors(
    status: int, expected: str | None, raised: type[Exception], message: str
) -> None:
    answer = {"message": {500: "etcd is down", 401: "Unauthorized"}.get(status, "no")}
    store = KubeLeaseStore(FakeApi([(status, answer)]), "prod", "broker-a")
    with pytest.raises(raised, match=message.replace("(", r"\(").replace(")", r"\)")):
        asyncio.run(store.write(RECORD, expected))


def test_a_master_whose_renewals_fail_is_deposed_once_its_lease_runs_out() -> None:
    now = [100.0]
    taken = stored(lease_object(RECORD.taken_by("a", "a:1"), "prod", "l", NOW), "1")
    failing = (503, {"message": "the API server is unavailable"})
    api = FakeApi([(200, taken), (200, stored(taken, "2")), failing, failing])
    store = KubeLeaseStore(api, "prod", "l")
    elector = Elector(
        store, "a", "a:1", duration_s=3.0, margin_s=0.6, preferred=True, unclean=False,
        clock=lambda: now[0],
    )  # fmt: skip

    async def scenario() -> None:
        assert (await elector.step()).master  # renewed: may write until 100 + 3 - 0.6
        assert elector.valid_until == pytest.approx(102.4)
        now[0] = 101.0
        assert (await elector.step()).master  # a failed read changes nothing yet
        api.answers[:] = [(200, stored(taken, "2")), failing]
        now[0] = 102.5
        assert not (await elector.step()).master  # the renewal failed past valid_until
        assert elector.valid_until == 0.0

    asyncio.run(scenario())


def test_a_request_without_an_answer_ends_with_an_error_in_its_timeout(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret\n")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        api = KubeApi(KubeCredentials("127.0.0.1", port, token, None), timeout_s=0.2)
        with pytest.raises(KubeApiError, match="no answer") as failed:
            api.request("GET", "/apis")
    assert failed.value.status == 0
    token.write_text("")
    with pytest.raises(KubeAccessError, match="is empty"):
        api.request("GET", "/apis")
