"""The CRDs of ``crds/`` on a real API server: each installs, is structural and established,
and the API server itself refuses invalid objects with a message that names the field —
schema bounds, patterns and enums, the CEL rules, and immutability on update. What a user
sees through the real ``kubectl``: an unknown field refused, a re-applied manifest accepted
and a changed storage size refused, the printer columns before any reconcile."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from kubernetes.client.rest import ApiException

from reconsume.topology.clusters import cluster_spec
from reconsume_operator.broker_pods import broker_statefulset
from reconsume_operator.kube import ChildWriter, KubeError

from .conftest import missing
from .control_plane import ControlPlane, kube_bin_dir
from .operator_support import crds, namespace

__all__ = ["crds", "namespace"]

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION = "reconsume.io", "v1alpha1"
PLURALS = {
    "BrokerCluster": "brokerclusters",
    "ConsumerGroup": "consumergroups",
    "Topic": "topics",
    "DeadLetterJob": "deadletterjobs",
    "User": "users",
}

Spec = dict[str, Any]


def obj(kind: str, name: str, spec: Spec) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def group(**spec: Any) -> dict[str, Any]:
    return obj("ConsumerGroup", "orders-consumer", {"cluster": "orders", **spec})


def topic(**spec: Any) -> dict[str, Any]:
    return obj("Topic", "orders", {"cluster": "orders", **spec})


def cluster(**spec: Any) -> dict[str, Any]:
    return obj("BrokerCluster", "orders", spec)


def job(**spec: Any) -> dict[str, Any]:
    return obj("DeadLetterJob", "drain", {"consumerGroup": "orders-consumer", **spec})


def user(**spec: Any) -> dict[str, Any]:
    return obj("User", "orders-app", {"cluster": "orders", **spec})


def renamed(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return {**manifest, "metadata": {"name": name}}


EXPONENTIAL = {"type": "Exponential", "initial": "1s", "max": "1m", "multiplier": 2}

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("maxTimes below -1", group(retry={"maxTimes": -2}), "spec.retry.maxTimes"),
    ("queueNums above 64", group(retry={"queueNums": 65}), "spec.retry.queueNums"),
    ("group name with a space", group(groupName="bad name"), "spec.groupName"),
    ("group name of 121 characters", group(groupName="g" * 121), "spec.groupName"),
    (
        "Customized without delays",
        group(retry={"policy": {"type": "Customized"}}),
        "retry.policy.delays is required",
    ),
    (
        "Exponential without multiplier",
        group(retry={"policy": {"type": "Exponential", "initial": "1s", "max": "1m"}}),
        "retry.policy.multiplier",
    ),
    (
        "Exponential max shorter than initial",
        group(retry={"policy": {**EXPONENTIAL, "initial": "2d", "max": "47h"}}),
        "retry.policy.max",
    ),
    (
        "a delay that does not parse",
        group(retry={"policy": {"type": "Customized", "delays": ["10x"]}}),
        "spec.retry.policy.delays[0]",
    ),
    (
        "delays under the Exponential policy",
        group(retry={"policy": {**EXPONENTIAL, "delays": ["1s"]}}),
        "retry.policy.type Customized",
    ),
    ("unknown message model", group(messageModel="Queue"), "spec.messageModel"),
    ("unknown deletion policy", group(deletionPolicy="Orphan"), "spec.deletionPolicy"),
    (
        "metadata.name that is no group name, without groupName",
        renamed(group(), "orders.consumer"),
        "spec.groupName is required",
    ),
    ("a retry topic as Topic", topic(topicName="%RETRY%x"), "spec.topicName"),
    ("a topic of 0 queues", topic(queues=0), "spec.queues"),
    ("a topic name of 128 characters", topic(topicName="t" * 128), "spec.topicName"),
    ("unknown topic permission", topic(perm="RW"), "spec.perm"),
    ("a delay level of 0s", cluster(delayLevels="1s 0s"), "spec.delayLevels"),
    ("unknown flush mode", cluster(flush="Never"), "spec.flush"),
    ("no brokers", cluster(brokers=0), "spec.brokers"),
    ("a name-server address without port", cluster(external={"nameServer": "x"}), "nameServer"),
    ("a storage size that is no quantity", cluster(storage={"size": "10 GB"}), "spec.storage.size"),
    ("Drain without sink", job(action="Drain"), "spec.sink is required"),
    ("a sink on Reprocess", job(action="Reprocess", sink={"path": "x"}), "spec.sink"),
    ("a target on Purge", job(action="Purge", target={"topic": "x"}), "spec.target"),
    ("no action", job(), "spec.action"),
    ("a schedule that is no cron", job(action="Purge", schedule="every day"), "spec.schedule"),
    (
        "a user with an unknown permission",
        user(topics=[{"name": "orders", "perm": "READ"}]),
        "spec.topics[0].perm",
    ),
    ("a user with an unknown default", user(defaultGroupPerm="ALL"), "spec.defaultGroupPerm"),
    (
        "a rotation token of 64 characters",
        user(rotation={"token": "t" * 64}),
        "spec.rotation.token",
    ),
    (
        "access control on for an external cluster without its admin Secret",
        cluster(external={"nameServer": "ns:9876"}, accessControl={"enabled": True}),
        "spec.accessControl.adminSecret: Invalid value",
    ),
    (
        "allowed addresses on an external cluster",
        cluster(external={"nameServer": "ns:9876"}, accessControl={"allowedAddresses": ["*"]}),
        "spec.accessControl.allowedAddresses: Invalid value",
    ),
    ("an unknown TLS mode", cluster(tls={"secretName": "t", "mode": "Strict"}), "spec.tls.mode"),
    ("TLS without its Secret", cluster(tls={}), "spec.tls.secretName"),
    ("a duplicate producer", topic(producers=["a", "a"]), "spec.producers[1]"),
]
"""What the API server must refuse on create, and a text its message must contain."""

UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("groupName changed", group(groupName="a"), group(groupName="b"), "spec.groupName"),
    ("cluster of a group changed", group(), group(cluster="other"), "spec.cluster"),
    ("topicName changed", topic(topicName="a"), topic(topicName="b"), "spec.topicName"),
    ("external added", cluster(), cluster(external={"nameServer": "a:1"}), "spec.external"),
    ("action changed", job(action="Reprocess"), job(action="Purge"), "spec.action"),
    ("cluster of a user changed", user(), user(cluster="other"), "spec.cluster is immutable"),
    (
        "storage size changed",
        cluster(storage={"size": "10Gi"}),
        cluster(storage={"size": "20Gi"}),
        "spec.storage.size: Invalid value",
    ),
    ("storage added", cluster(), cluster(storage={"size": "1Gi"}), "spec.storage: Invalid"),
    (
        "storage class added",
        cluster(storage={}),
        cluster(storage={"storageClassName": "fast"}),
        "spec.storage.storageClassName",
    ),
]
"""Valid objects, and an update of each that the API server must refuse."""


def custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


def create(api: kubernetes.client.ApiClient, ns: str, manifest: dict[str, Any]) -> Any:
    plural = PLURALS[manifest["kind"]]
    return custom(api).create_namespaced_custom_object(GROUP, VERSION, ns, plural, manifest)


def refusal(call: Callable[[], object]) -> str:
    """The API server's message refusing ``call``; fails when it is accepted."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 422, refused.value.body
    message: str = json.loads(refused.value.body)["message"]
    return message


def test_every_crd_is_installed_structural_and_established(
    crds: None, api: kubernetes.client.ApiClient
) -> None:
    extensions = kubernetes.client.ApiextensionsV1Api(api)
    for path in sorted((REPO / "crds").glob("*.reconsume.io.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        installed = extensions.read_custom_resource_definition(name)
        conditions = {c.type: c for c in installed.status.conditions or []}
        assert conditions["Established"].status == "True", name
        assert conditions["NamesAccepted"].status == "True", name
        # A non-structural schema would show as this condition (and pruning would be off).
        assert "NonStructuralSchema" not in conditions, conditions["NonStructuralSchema"].message
        assert installed.spec.names.categories == ["reconsume"], name
        assert installed.spec.versions[0].subresources.status is not None, name


@pytest.mark.parametrize(
    ("manifest", "names"), [(m, f) for _, m, f in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_objects_are_refused_naming_the_field(
    namespace: str, api: kubernetes.client.ApiClient, manifest: dict[str, Any], names: str
) -> None:
    message = refusal(lambda: create(api, namespace, manifest))
    assert names in message, message


@pytest.mark.parametrize(
    ("before", "after", "names"),
    [(b, a, f) for _, b, a, f in UPDATES],
    ids=[i for i, *_ in UPDATES],
)
def test_immutable_fields_refuse_a_change(
    namespace: str,
    api: kubernetes.client.ApiClient,
    before: dict[str, Any],
    after: dict[str, Any],
    names: str,
) -> None:
    created = create(api, namespace, before)
    plural = PLURALS[before["kind"]]
    changed = {
        **after,
        "metadata": {
            **after["metadata"],
            "resourceVersion": created["metadata"]["resourceVersion"],
        },
    }
    message = refusal(
        lambda: custom(api).replace_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, before["metadata"]["name"], changed
        )
    )
    assert names in message, message


def test_every_example_is_accepted_and_defaults_are_filled_in(
    namespace: str, api: kubernetes.client.ApiClient
) -> None:
    kinds = set()
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for manifest in yaml.safe_load_all(path.read_text()):
            if not manifest or manifest.get("apiVersion") != f"{GROUP}/{VERSION}":
                continue
            manifest["metadata"].pop("namespace", None)
            create(api, namespace, manifest)
            kinds.add(manifest["kind"])
    assert kinds == set(PLURALS)

    minimal = create(api, namespace, renamed(group(), "minimal"))
    assert minimal["spec"]["retry"]["maxTimes"] == 16
    assert minimal["spec"]["retry"]["queueNums"] == 1
    assert minimal["spec"]["retry"]["policy"] == {"type": "DelayLevels"}


# ------------------------------------------------------------------------ through kubectl
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(control_plane: ControlPlane, namespace: str) -> Kubectl:
    """The real ``kubectl`` (``make kube-bin`` builds it beside kube-apiserver) on the test's
    namespace; ``manifest`` goes to its standard input."""
    binary = kube_bin_dir() / "kubectl"
    if not binary.is_file():
        missing(f"kubectl is not built ({binary}): run `make k8s-deps` (needs Go)")

    def run(*args: str, manifest: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), f"--kubeconfig={control_plane.kubeconfig}", "-n", namespace, *args],
            input=None if manifest is None else yaml.safe_dump(manifest),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run


def test_kubectl_refuses_an_unknown_field_by_default(
    kubectl: Kubectl, namespace: str, api: kubernetes.client.ApiClient
) -> None:
    """kubectl asks for strict field validation (its default since 1.27); a client that does
    not ask gets the field dropped (and a warning it may not show)."""
    manifest = topic(foo=1)
    refused = kubectl("apply", "-f", "-", manifest=manifest)
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "spec.foo"' in refused.stderr, refused.stderr
    warned = kubectl("apply", "--validate=warn", "-f", "-", manifest=manifest)
    assert warned.returncode == 0, warned.stderr
    assert 'unknown field "spec.foo"' in warned.stderr
    stored = custom(api).get_namespaced_custom_object(GROUP, VERSION, namespace, "topics", "orders")
    assert "foo" not in stored["spec"]
    created = create(api, namespace, renamed(topic(foo=1), "quiet"))
    assert "foo" not in created["spec"]


def test_kubectl_reapplies_a_cluster_and_refuses_a_changed_storage_size(kubectl: Kubectl) -> None:
    """The same manifest applies again (client-side and server-side); a changed size is
    refused by the CRD, not accepted and then refused to the operator by the StatefulSet."""
    manifest = cluster(storage={"size": "10Gi"})
    for args in (["apply"], ["apply"], ["apply", "--server-side"], ["apply"]):
        applied = kubectl(*args, "-f", "-", manifest=manifest)
        assert applied.returncode == 0, (args, applied.stderr)
    refused = kubectl("apply", "-f", "-", manifest=cluster(storage={"size": "20Gi"}))
    assert refused.returncode != 0
    assert "spec.storage.size: Invalid value" in refused.stderr, refused.stderr
    assert "spec.storage.size is immutable" in refused.stderr
    assert "PersistentVolumeClaim" in refused.stderr
    # Created without storage: applying the defaults is no change, another size is.
    bare = renamed(cluster(), "bare")
    assert kubectl("apply", "-f", "-", manifest=bare).returncode == 0
    defaults = renamed(cluster(storage={"size": "10Gi"}), "bare")
    assert kubectl("apply", "-f", "-", manifest=defaults).returncode == 0
    assert kubectl("apply", "-f", "-", manifest=bare).returncode == 0
    bigger = kubectl("apply", "-f", "-", manifest=renamed(cluster(storage={"size": "5Gi"}), "bare"))
    assert bigger.returncode != 0
    assert "spec.storage: Invalid value" in bigger.stderr, bigger.stderr


def columns(listing: str) -> list[dict[str, str]]:
    """The rows of ``kubectl get`` output by column name; blank cells are "". Columns are
    left-aligned and at least three spaces apart; a name may hold one (``NAME SERVER``)."""
    header, *rows = listing.splitlines()
    found = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    ends = [start for _, start in found[1:]] + [None]
    return [
        {name: row[start:end].strip() for (name, start), end in zip(found, ends, strict=True)}
        for row in rows
    ]


def test_printer_columns_show_the_spec_before_any_reconcile(
    kubectl: Kubectl, api: kubernetes.client.ApiClient, namespace: str
) -> None:
    """No operator runs here: GROUP and TOPIC show the name on the brokers (spec.groupName,
    else metadata.name) from creation on, CONSUME TYPE (-o wide) spec.consumeType or its
    default, an external cluster shows no storage, and BROKERS the brokers registered (status)
    while DESIRED (-o wide) is spec.brokers."""
    for manifest in (
        group(groupName="GID_orders", consumeType="Pop"),
        renamed(group(), "plain-consumer"),
        topic(),
        renamed(topic(topicName="orders_eu"), "orders.eu"),
        cluster(external={"nameServer": "ns:9876"}),
    ):
        applied = kubectl("apply", "-f", "-", manifest=manifest)
        assert applied.returncode == 0, applied.stderr
    shown = {row["NAME"]: row for row in columns(kubectl("get", "rcg").stdout)}
    assert {name: (row["GROUP"], row["CLUSTER"]) for name, row in shown.items()} == {
        "orders-consumer": ("GID_orders", "orders"),
        "plain-consumer": ("plain-consumer", "orders"),
    }
    wide = {row["NAME"]: row for row in columns(kubectl("get", "rcg", "-o", "wide").stdout)}
    assert {name: row["CONSUME TYPE"] for name, row in wide.items()} == {
        "orders-consumer": "Pop",
        "plain-consumer": "Any",  # the default, stored by the API server
    }
    shown = {row["NAME"]: row for row in columns(kubectl("get", "rtopic").stdout)}
    assert {name: (row["TOPIC"], row["QUEUES"]) for name, row in shown.items()} == {
        "orders": ("orders", "8"),
        "orders.eu": ("orders_eu", "8"),
    }
    (row,) = columns(kubectl("get", "rbc", "-o", "wide").stdout)
    assert (row["NAME"], row["BROKERS"], row["DESIRED"], row["NAME SERVER"]) == (
        "orders",
        "",
        "2",
        "",
    )
    stored = custom(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "brokerclusters", "orders"
    )
    assert "storage" not in stored["spec"]
    custom(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "brokerclusters", "orders", {"status": {"readyBrokers": 3}}
    )
    (row,) = columns(kubectl("get", "rbc").stdout)
    assert row["BROKERS"] == "3"


def test_a_refused_statefulset_change_reads_as_the_api_servers_message(
    control_plane: ControlPlane, namespace: str
) -> None:
    """What the storage rules spare the user: the StatefulSet refuses a new volume claim
    template, and the operator's condition shows the API server's message, not its body."""
    writer = ChildWriter(control_plane.configuration())
    body = {"metadata": {"name": "orders", "namespace": namespace}, "spec": {}}
    try:
        writer.apply(broker_statefulset(cluster_spec(body, "img:1")))
        body["spec"] = {"storage": {"size": "20Gi"}}
        with pytest.raises(KubeError) as refused:
            writer.apply(broker_statefulset(cluster_spec(body, "img:1")))
    finally:
        writer.close()
    message = str(refused.value)
    assert message.startswith(
        'StatefulSet orders-broker: 422 Unprocessable Entity: StatefulSet.apps "orders-broker" '
        "is invalid: spec: Forbidden: updates to statefulset spec for fields other than"
    ), message
    assert "b'" not in message
    assert '"kind"' not in message


def test_a_user_is_stored_with_its_defaults_and_listed_by_kubectl(
    kubectl: Kubectl, api: kubernetes.client.ApiClient, namespace: str
) -> None:
    """No operator runs here: the API server fills in the defaults (rotation's window only
    when rotation is given), `kubectl get ruser` shows the spec's columns and the category
    lists Users with the other kinds."""
    plain = create(api, namespace, user())
    assert plain["spec"] == {
        "cluster": "orders",
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "DENY",
    }
    rotating = create(api, namespace, renamed(user(rotation={"token": "1"}), "rotating"))
    assert rotating["spec"]["rotation"] == {"token": "1", "windowSeconds": 600}
    applied = kubectl("apply", "-f", "-", manifest=renamed(user(admin=True), "admin"))
    assert applied.returncode == 0, applied.stderr
    shown = {row["NAME"]: row for row in columns(kubectl("get", "ruser", "-o", "wide").stdout)}
    assert {name: (row["CLUSTER"], row["ADMIN"], row["SECRET"]) for name, row in shown.items()} == {
        "orders-app": ("orders", "false", ""),
        "rotating": ("orders", "false", ""),
        "admin": ("orders", "true", ""),
    }
    assert shown["admin"]["ACCESSKEY"] == ""
    listed = kubectl("get", "reconsume", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert "user.reconsume.io/orders-app" in listed.stdout.split()
