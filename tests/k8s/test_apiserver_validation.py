"""Embedded mode's validator (reconsume.apiserver.validation) against a real API server: for a
corpus of objects — every example, every CEL rule broken, bounds, enums, lengths, patterns,
types, required and unknown fields, bad names, and valid variations — a server-side dry-run
create (``fieldValidation=Strict``) is accepted exactly when ``check()`` finds nothing, and
when it is refused, the API server's message names every path ``check()`` reports. Transition
rules: a dry-run update of a created object against ``check(new, old)``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from kubernetes.client.rest import ApiException

from reconsume.apiserver.crds import API_VERSION, KINDS, plural
from reconsume.apiserver.schema import Problem
from reconsume.apiserver.validation import check, checked

from . import network_policy_cases
from .control_plane import ControlPlane
from .operator_support import crds, new_namespace

__all__ = ["crds"]

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION = API_VERSION.split("/")

Object = dict[str, Any]


def obj(kind: str, name: str, spec: Any, **metadata: Any) -> Object:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, **metadata},
        "spec": spec,
    }


def group(name: str = "orders-consumer", **spec: Any) -> Object:
    return obj("ConsumerGroup", name, {"cluster": "orders", **spec})


def topic(name: str = "orders", **spec: Any) -> Object:
    return obj("Topic", name, {"cluster": "orders", **spec})


def cluster(name: str = "orders", **spec: Any) -> Object:
    return obj("BrokerCluster", name, spec)


def job(name: str = "drain", **spec: Any) -> Object:
    return obj("DeadLetterJob", name, {"consumerGroup": "orders-consumer", **spec})


def purge(**spec: Any) -> Object:
    return job(action="Purge", **spec)


def user(name: str = "orders-app", **spec: Any) -> Object:
    return obj("User", name, {"cluster": "orders", **spec})


def external(**spec: Any) -> Object:
    return cluster(external={"nameServer": "ns:9876"}, **spec)


def policy(**fields: Any) -> dict[str, Any]:
    return {"policy": fields}


def with_metadata(document: Object, **metadata: Any) -> Object:
    return {**document, "metadata": metadata}


def examples() -> Iterator[tuple[str, Object]]:
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if document and document.get("apiVersion") == API_VERSION:
                document["metadata"].pop("namespace", None)
                yield f"example {path.name}#{index}", document


EXPONENTIAL = {"type": "Exponential", "initial": "1s", "max": "1m", "multiplier": 2}
SINK = {"path": "file:///dlq/"}

VALID: list[tuple[str, Object]] = [
    *examples(),
    ("minimal group", group()),
    ("group with a group name of RocketMQ's characters", group(groupName="%GID|orders_1-a")),
    ("group named as its group", group("gid-orders")),
    ("metadata.name of 120 characters", group("g" * 120)),
    ("Customized delays", group(retry=policy(type="Customized", delays=["500ms", "10s", "1d"]))),
    ("Exponential", group(retry=policy(**EXPONENTIAL))),
    ("Exponential max equal to initial", group(retry=policy(**{**EXPONENTIAL, "max": "60s"}))),
    ("max in ms", group(retry=policy(**{**EXPONENTIAL, "initial": "1s", "max": "1000ms"}))),
    ("Broadcasting", group(messageModel="Broadcasting", deletionPolicy="Delete")),
    ("consumed by RocketMQ 5 clients only", group(consumeType="Pop")),
    ("consumed by RocketMQ 4.x consumers only", group(consumeType="Pull", orderly=True)),
    ("retries off", group(retry={"queueNums": 0, "maxTimes": -1})),
    ("largest bounds", group(retry={"queueNums": 64, "maxTimes": 2147483647})),
    (
        "SQL92 subscription",
        group(subscriptions=[{"topic": "a", "type": "SQL92", "expression": "x > 1"}]),
    ),
    ("64 subscriptions", group(subscriptions=[{"topic": f"t{i}"} for i in range(64)])),
    ("nulls are dropped", group(retry=None, subscriptions=None, orderly=None)),
    ("integral float", group(retry={"queueNums": 3.0})),
    ("topic with a name", topic("orders.eu", topicName="orders_eu")),
    ("topic with everything", topic(queues=1024, perm="ReadOnly", order=True)),
    ("topic named like a retry topic, not prefixed", topic(topicName="RETRY_orders")),
    ("topic of 127 characters", topic("t" * 127)),
    ("minimal cluster", cluster()),
    ("largest cluster", cluster(brokers=32, nameServers=5, retentionHours=8760, flush="Sync")),
    ("cluster resources", cluster(resources={"requests": {"cpu": "500m", "memory": 1}})),
    ("name-server resources", cluster(nameServerResources={"limits": {"memory": "1Gi"}})),
    ("no name-server resources", cluster(nameServerResources={})),
    ("cluster storage class null", cluster(storage={"size": "1.5Ti", "storageClassName": None})),
    ("delay levels with spaces", cluster(delayLevels=" 1ms  2d ")),
    ("external cluster", cluster(external={"nameServer": "a:1;b.svc:9876", "clusterName": "C"})),
    (
        "cluster with access control and TLS",
        cluster(
            accessControl={
                "enabled": True,
                "adminSecret": "orders-admin",
                "allowedAddresses": [
                    "*",
                    "10.0.0.*",
                    "192.168.0-15.*",
                    "192.168.1.{1,7,9}",
                    "10.0.0.1,10.0.0.2",
                    "::1",
                ],
            },
            tls={"secretName": "orders-tls", "mode": "Permissive", "clientAuth": "Required"},
        ),
    ),
    ("cluster without access control", cluster(accessControl={"enabled": False})),
    ("external cluster, access control absent", external(accessControl={})),
    ("external cluster, no addresses", external(accessControl={"allowedAddresses": []})),
    (
        "external cluster signing with its admin Secret, over TLS",
        external(
            accessControl={"enabled": True, "adminSecret": "legacy-admin"},
            tls={"secretName": "legacy-ca"},
        ),
    ),
    ("minimal user", user()),
    (
        "user with everything",
        user(
            "orders.app",
            secretName="orders-app-keys",
            admin=True,
            defaultTopicPerm="PUB|SUB",
            defaultGroupPerm="SUB",
            topics=[{"name": "orders", "perm": "PUB"}, {"name": "%DLQ%GID_x", "perm": "DENY"}],
            groups=[{"name": "GID_orders", "perm": "SUB"}],
            allowedAddress="10.244.*.*",
            rotation={"token": "t" * 63, "windowSeconds": 86400},
        ),
    ),
    ("256 topic permissions", user(topics=[{"name": f"t{i}", "perm": "SUB"} for i in range(256)])),
    ("topic with producers and consumers", topic(producers=["a", "b.c"], consumers=["a"])),
    ("group with consumers", group(consumers=[f"u{i}" for i in range(256)])),
    ("Reprocess with target", job(action="Reprocess", target={"topic": "t"}, ratePerSecond=1)),
    ("Drain as JSON", job(action="Drain", sink={**SINK, "format": "json"})),
    ("scheduled purge", purge(schedule="@daily", maxMessages=2**63 - 1, dryRun=True)),
    ("cron purge", purge(schedule="*/5 * * * 1-5")),
    ("purge at midnight", purge(schedule="@midnight")),
    (
        "spark settings",
        purge(
            spark={
                "driver": {"cores": 64, "memory": "512m"},
                "executor": {"instances": 1000},
                "conf": {"a.b": "c"},
            }
        ),
    ),
    (
        "labels, annotations and finalizers",
        with_metadata(
            purge(),
            name="orders.eu-1",
            labels={"app.kubernetes.io/name": "orders", "tier": ""},
            annotations={"Example.com/Note": "anything"},
            finalizers=["example.com/cleanup"],
        ),
    ),
    *network_policy_cases.VALID,
]

INVALID: list[tuple[str, Object]] = [
    # CEL rules
    ("metadata.name that is no group name", group("orders.consumer")),
    ("metadata.name of 121 characters", group("g" * 121)),
    ("Customized without delays", group(retry=policy(type="Customized"))),
    ("delays under DelayLevels", group(retry=policy(delays=["1s"]))),
    ("delays under Exponential", group(retry=policy(**EXPONENTIAL, delays=["1s"]))),
    (
        "Exponential without multiplier",
        group(retry=policy(type="Exponential", initial="1s", max="1m")),
    ),
    ("Exponential without anything", group(retry=policy(type="Exponential"))),
    ("initial under DelayLevels", group(retry=policy(initial="1s"))),
    (
        "multiplier under Customized",
        group(retry=policy(type="Customized", delays=["1s"], multiplier=2)),
    ),
    (
        "max shorter than initial",
        group(retry=policy(**{**EXPONENTIAL, "initial": "2d", "max": "47h"})),
    ),
    ("max in ms shorter", group(retry=policy(**{**EXPONENTIAL, "initial": "1s", "max": "999ms"}))),
    ("max in m shorter", group(retry=policy(**{**EXPONENTIAL, "initial": "61s", "max": "1m"}))),
    ("metadata.name that is no topic name", topic("orders.eu")),
    ("a retry topic", topic(topicName="%RETRY%orders")),
    ("a dead-letter topic", topic(topicName="%DLQ%orders")),
    ("a system topic", topic(topicName="rmq_sys_trace")),
    ("the schedule topic", topic(topicName="SCHEDULE_TOPIC_XXXX")),
    ("TBW102", topic(topicName="TBW102")),
    ("Drain without sink", job(action="Drain")),
    ("a sink on Reprocess", job(action="Reprocess", sink=SINK)),
    ("a target on Purge", purge(target={"topic": "t"})),
    ("a target and no sink on Drain", job(action="Drain", target={"topic": "t"})),
    (
        "access control on for an external cluster without its admin Secret",
        external(accessControl={"enabled": True}),
    ),
    (
        "allowed addresses on an external cluster",
        external(accessControl={"allowedAddresses": ["*"]}),
    ),
    # bounds
    ("maxTimes below -1", group(retry={"maxTimes": -2})),
    ("maxTimes above int32", group(retry={"maxTimes": 2147483648})),
    ("queueNums above 64", group(retry={"queueNums": 65})),
    ("queueNums below 0", group(retry={"queueNums": -1})),
    ("multiplier 0", group(retry=policy(**{**EXPONENTIAL, "multiplier": 0}))),
    ("multiplier 101", group(retry=policy(**{**EXPONENTIAL, "multiplier": 101}))),
    ("no brokers", cluster(brokers=0)),
    ("33 brokers", cluster(brokers=33)),
    ("6 name servers", cluster(nameServers=6)),
    ("retention of 0 hours", cluster(retentionHours=0)),
    ("0 queues", topic(queues=0)),
    ("1025 queues", topic(queues=1025)),
    ("rate 0", purge(ratePerSecond=0)),
    ("maxMessages 0", purge(maxMessages=0)),
    ("65 driver cores", purge(spark={"driver": {"cores": 65}})),
    ("1001 executors", purge(spark={"executor": {"instances": 1001}})),
    # enums
    ("unknown message model", group(messageModel="Queue")),
    ("unknown consume type", group(consumeType="Both")),
    ("consume type as the attribute spells it", group(consumeType="POP")),
    ("unknown deletion policy", group(deletionPolicy="Orphan")),
    ("unknown subscription type", group(subscriptions=[{"topic": "a", "type": "REGEX"}])),
    ("unknown permission", topic(perm="RW")),
    ("unknown flush", cluster(flush="Never")),
    ("unknown action", job(action="Move")),
    ("unknown sink format", job(action="Drain", sink={**SINK, "format": "csv"})),
    ("a user with an unknown permission", user(topics=[{"name": "orders", "perm": "READ"}])),
    ("a user with an unknown group permission", user(groups=[{"name": "g", "perm": "pub"}])),
    ("an unknown default permission", user(defaultTopicPerm="ANY")),
    ("an unknown TLS mode", cluster(tls={"secretName": "t", "mode": "Disabled"})),
    ("an unknown client authentication", cluster(tls={"secretName": "t", "clientAuth": "Want"})),
    # lengths
    ("group name of 121 characters", group(groupName="g" * 121)),
    ("topic name of 128 characters", topic(topicName="t" * 128)),
    ("cluster name of 64 characters", group(cluster="c" * 64)),
    ("empty cluster name", group(cluster="")),
    ("empty image", cluster(image="")),
    ("empty filter", purge(filter="")),
    ("schedule of 4 characters", purge(schedule="@x y")),
    ("empty sink path", job(action="Drain", sink={"path": ""})),
    ("spark conf value too long", purge(spark={"conf": {"a": "x" * 4097}})),
    ("a rotation token of 64 characters", user(rotation={"token": "t" * 64})),
    ("an allowed address of 65 characters", user(allowedAddress="1" * 65)),
    ("a topic permission of 128 characters", user(topics=[{"name": "t" * 128, "perm": "SUB"}])),
    # patterns
    ("cluster name with capitals", group(cluster="Orders")),
    ("group name with a space", group(groupName="bad name")),
    ("group name with a non-ASCII letter", group(groupName="ordérs")),
    ("a delay that does not parse", group(retry=policy(type="Customized", delays=["10x"]))),
    ("a delay with a newline", group(retry=policy(type="Customized", delays=["10s\n"]))),
    ("initial without unit", group(retry=policy(**{**EXPONENTIAL, "initial": "5"}))),
    ("storage size that is no quantity", cluster(storage={"size": "10 GB"})),
    ("delay level of 0s", cluster(delayLevels="1s 0s")),
    ("name server without port", cluster(external={"nameServer": "x"})),
    ("cluster name with a space", cluster(external={"nameServer": "a:1", "clusterName": "a b"})),
    ("consumerGroup with capitals", purge(consumerGroup="Orders")),
    ("schedule that is no cron", purge(schedule="every day")),
    ("driver memory 1gb", purge(spark={"driver": {"memory": "1gb"}})),
    ("target topic with a slash", job(action="Reprocess", target={"topic": "a/b"})),
    ("subscription topic with a space", group(subscriptions=[{"topic": "a b"}])),
    ("a CIDR allowed address", cluster(accessControl={"allowedAddresses": ["10.0.0.0/8"]})),
    ("a user's Secret with capitals", user(secretName="Orders")),
    ("an admin Secret with an underscore", cluster(accessControl={"adminSecret": "a_b"})),
    ("a producer with capitals", topic(producers=["Orders"])),
    # items and properties
    ("empty delays", group(retry=policy(type="Customized", delays=[]))),
    ("1001 delays", group(retry=policy(type="Customized", delays=["1s"] * 1001))),
    ("65 subscriptions", group(subscriptions=[{"topic": f"t{i}"} for i in range(65)])),
    (
        "a duplicate subscription",
        group(subscriptions=[{"topic": "a"}, {"topic": "a", "type": "SQL92"}]),
    ),
    ("17 resource requests", cluster(resources={"requests": {f"r{i}": 1 for i in range(17)}})),
    (
        "17 name-server limits",
        cluster(nameServerResources={"limits": {f"r{i}": 1 for i in range(17)}}),
    ),
    ("257 spark properties", purge(spark={"conf": {f"k{i}": "v" for i in range(257)}})),
    ("65 allowed addresses", cluster(accessControl={"allowedAddresses": ["*"] * 65})),
    ("257 consumers of a group", group(consumers=[f"u{i}" for i in range(257)])),
    ("a duplicate producer", topic(producers=["a", "a"])),
    (
        "a duplicate topic permission",
        user(topics=[{"name": "a", "perm": "SUB"}, {"name": "a", "perm": "PUB"}]),
    ),
    ("a rotation window of a day and a second", user(rotation={"windowSeconds": 86401})),
    # types
    ("brokers as a string", cluster(brokers="two")),
    ("brokers as a fraction", cluster(brokers=2.5)),
    ("orderly as a string", group(orderly="yes")),
    ("retry as a list", group(retry=[])),
    ("subscriptions as an object", group(subscriptions={"topic": "a"})),
    ("a null subscription", group(subscriptions=[None])),
    ("spec as a string", obj("Topic", "orders", "x")),
    ("a boolean quantity", cluster(resources={"limits": {"cpu": True}})),
    ("maxMessages beyond int64", purge(maxMessages=2**63)),
    # required
    ("no spec", {k: v for k, v in topic().items() if k != "spec"}),
    ("null spec", obj("Topic", "orders", None)),
    ("no cluster", obj("ConsumerGroup", "orders", {})),
    ("no sink path", job(action="Drain", sink={"format": "json"})),
    ("no name server", cluster(external={"clusterName": "a"})),
    ("a subscription without topic", group(subscriptions=[{"expression": "*"}])),
    ("no action", job()),
    ("a user without cluster", obj("User", "orders-app", {})),
    ("a topic permission without perm", user(topics=[{"name": "orders"}])),
    ("TLS without its Secret", cluster(tls={"mode": "Enforcing"})),
    # unknown fields
    ("unknown spec field", group(extra=1)),
    ("unknown top-level field", {**topic(), "extra": 1}),
    ("unknown nested field", group(retry={"maxTimes": 1, "backoff": "1s"})),
    ("unknown metadata field", with_metadata(topic(), name="orders", owner="me")),
    ("unknown spark field", purge(spark={"driver": {"gpus": 1}})),
    ("unknown access control field", cluster(accessControl={"users": []})),
    ("unknown user field", user(password="x")),
    # names
    ("no name", with_metadata(topic())),
    ("a name with capitals", topic("Orders")),
    ("a name ending with a dot", topic("orders.")),
    ("a name of 254 characters", topic("t" * 254)),
    ("a cluster name with a dot", cluster("orders.eu")),
    ("a cluster name of 41 characters", cluster("c" * 41)),
    ("a label key with a space", with_metadata(purge(), name="a", labels={"a b": "x"})),
    ("a label value with a space", with_metadata(purge(), name="a", labels={"a": "x y"})),
    (
        "an annotation key with two slashes",
        with_metadata(purge(), name="a", annotations={"a/b/c": "x"}),
    ),
    ("a finalizer with a space", with_metadata(purge(), name="a", finalizers=["a b"])),
    # envelope
    ("an unknown kind", {**topic(), "kind": "Queue"}),
    # several problems at once
    ("bounds and a rule", group("a.b", retry={"queueNums": 65, "policy": {"type": "Customized"}})),
    ("an enum keeps the rules from running", group("a.b", messageModel="Queue")),
    ("a bound and a pattern", cluster(brokers=0, delayLevels="0s", image="")),
    ("two rules on a job", job(action="Drain", target={"topic": "t"}, maxMessages=0)),
    *network_policy_cases.INVALID,
]


@pytest.fixture(scope="module")
def server(crds: None, control_plane: ControlPlane) -> Iterator[tuple[Any, str]]:
    """The custom objects API and a namespace of this module."""
    with control_plane.api_client() as api:
        yield kubernetes.client.CustomObjectsApi(api), new_namespace(api)


def plural_of(document: Object) -> str:
    kind = document.get("kind")
    return plural(kind) if kind in KINDS else "topics"


def refusal(call: Any) -> str | None:
    """The API server's message refusing the call, or None when it accepts it."""
    try:
        call()
    except ApiException as exc:
        status, body = exc.status, exc.body
    else:
        return None
    assert status in (400, 422), body
    message: str = json.loads(body)["message"]
    return message


_FIELD_ERROR = re.compile(
    r"(?:\[|: |, )([A-Za-z][\w.\[\]%|-]*): (?:Invalid value|Unsupported value|Required value"
    r"|Too long|Too many|Duplicate value|Forbidden)"
)


def server_paths(message: str) -> set[str]:
    """The fields the API server's message names: ``unknown field "spec.x"`` of a strict
    decoding error, ``spec.x: Invalid value: ...`` of a validation error."""
    return set(re.findall(r'unknown field "([^"]+)"', message)) | set(_FIELD_ERROR.findall(message))


NAMED_DIFFERENTLY = {
    "subscriptions as an object": "the API server's strict decoding reports the object's keys "
    "as unknown fields of the list's items (spec.subscriptions.topic); check() reports the "
    "list's type (spec.subscriptions)",
}
"""Refused by both, where the API server names other fields than check() does, and why."""


def assert_agree(
    document: Object, problems: list[Problem], refused: str | None, *, same_fields: bool = True
) -> None:
    """Accepted by the API server exactly when check() finds nothing; when refused, the
    server's message names every path check() reports, and (``same_fields``) check()
    reports every field the server names."""
    shown = "\n".join(f"  {p}" for p in problems) or "  (none)"
    detail = f"API server: {refused or 'accepted'}\ncheck():\n{shown}"
    assert (refused is None) == (problems == []), detail
    if refused is not None:
        missing = [p for p in problems if p.path not in refused]
        assert not missing, f"paths the API server does not name: {missing}\n{detail}"
        unreported = server_paths(refused) - {p.path for p in problems}
        assert not unreported or not same_fields, (
            f"fields check() does not report: {unreported}\n{detail}"
        )


def dry_run_create(server: tuple[Any, str], document: Object) -> str | None:
    """The API server's refusal of a server-side dry-run create with strict field validation,
    or None when it accepts."""
    custom, namespace = server
    return refusal(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, plural_of(document), document,
            dry_run="All", field_validation="Strict",
        )
    )  # fmt: skip


@pytest.mark.parametrize("document", [d for _, d in VALID], ids=[i for i, _ in VALID])
def test_valid_objects_are_accepted_by_both(server: tuple[Any, str], document: Object) -> None:
    refused = dry_run_create(server, document)
    assert_agree(document, check(document), refused)
    assert refused is None


@pytest.mark.parametrize(("case", "document"), INVALID, ids=[i for i, _ in INVALID])
def test_invalid_objects_are_refused_by_both_naming_the_same_fields(
    server: tuple[Any, str], case: str, document: Object
) -> None:
    refused = dry_run_create(server, document)
    assert_agree(document, check(document), refused, same_fields=case not in NAMED_DIFFERENTLY)
    assert refused is not None


UPDATES: list[tuple[str, Object, Object]] = [
    ("groupName changed", group(groupName="a"), group(groupName="b")),
    ("groupName added", group(), group(groupName="orders")),
    ("groupName removed", group(groupName="orders"), group()),
    ("cluster of a group changed", group(), group(cluster="other")),
    ("cluster and groupName changed", group(groupName="a"), group(cluster="x", groupName="b")),
    ("topicName changed", topic(topicName="a"), topic(topicName="b")),
    ("topicName added", topic(), topic(topicName="orders")),
    ("topicName removed", topic(topicName="orders"), topic()),
    ("cluster of a topic changed", topic(), topic(cluster="other")),
    ("external added", cluster(), cluster(external={"nameServer": "a:1"})),
    ("external removed", cluster(external={"nameServer": "a:1"}), cluster()),
    ("storage size changed", cluster(storage={"size": "10Gi"}), cluster(storage={"size": "20Gi"})),
    ("storage added with another size", cluster(), cluster(storage={"size": "20Gi"})),
    ("storage removed at another size", cluster(storage={"size": "20Gi"}), cluster()),
    ("storage added with a class", cluster(), cluster(storage={"storageClassName": "fast"})),
    ("storage class added", cluster(storage={}), cluster(storage={"storageClassName": "fast"})),
    ("storage class removed", cluster(storage={"storageClassName": "a"}), cluster(storage={})),
    (
        "storage class changed",
        cluster(storage={"storageClassName": "a"}),
        cluster(storage={"storageClassName": "b"}),
    ),
    (
        "a null storage class made a class",
        cluster(storage={"storageClassName": None}),
        cluster(storage={"storageClassName": "a"}),
    ),
    ("consumerGroup changed", purge(), purge(consumerGroup="other")),
    ("cluster of a user changed", user(), user(cluster="other")),
    (
        "cluster of a user changed with its permissions",
        user(),
        user(cluster="other", topics=[{"name": "t", "perm": "SUB"}]),
    ),
    (
        "access control turned on for an external cluster without its admin Secret",
        external(),
        external(accessControl={"enabled": True}),
    ),
    ("action changed", job(action="Reprocess"), purge()),
    ("action changed to Drain without sink", purge(), job(action="Drain")),
    (
        "an immutable field and a bound",
        group(groupName="a"),
        group(groupName="b", retry={"queueNums": 99}),
    ),
    # accepted
    ("group retry changed", group(groupName="a"), group(groupName="a", retry={"maxTimes": 3})),
    ("topic queues changed", topic(topicName="a"), topic(topicName="a", queues=4)),
    (
        "external name server changed",
        cluster(external={"nameServer": "a:1"}),
        cluster(external={"nameServer": "b:2"}),
    ),
    ("job filter changed", purge(), purge(filter="tags = 'x'", dryRun=True)),
    ("storage added as the defaults", cluster(), cluster(storage={"size": "10Gi"})),
    ("default storage removed", cluster(storage={}), cluster(brokers=3)),
    ("storage size kept", cluster(storage={"size": "1Ti"}), cluster(storage={"size": "1Ti"})),
    ("a null storage class removed", cluster(storage={"storageClassName": None}), cluster()),
    (
        "a null storage class made absent",
        cluster(storage={"storageClassName": None}),
        cluster(storage={"size": "10Gi"}),
    ),
    ("labels added", topic(), with_metadata(topic(), name="orders", labels={"a": "b"})),
    (
        "user permissions changed and its key rotated",
        user(),
        user(admin=True, groups=[{"name": "g", "perm": "SUB"}], rotation={"token": "2"}),
    ),
    ("access control turned off", cluster(), cluster(accessControl={"enabled": False})),
    ("TLS added", cluster(), cluster(tls={"secretName": "orders-tls"})),
    ("producers added", topic(), topic(producers=["orders-app"])),
    *network_policy_cases.UPDATES,
]


@pytest.mark.parametrize(
    ("index", "old", "new"),
    [(index, old, new) for index, (_, old, new) in enumerate(UPDATES)],
    ids=[i for i, _, _ in UPDATES],
)
def test_updates_agree_with_transition_rules(
    server: tuple[Any, str], index: int, old: Object, new: Object
) -> None:
    """The old object is created for real (under a name of its own), the update is a dry
    run."""
    custom, namespace = server
    name = f"u{index:02d}-{old['metadata']['name']}"
    old = {**old, "metadata": {**old["metadata"], "name": name}}
    new = {**new, "metadata": {**new["metadata"], "name": name}}
    assert check(old) == []
    plural_name = plural_of(old)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural_name, old)
    version = created["metadata"]["resourceVersion"]
    sent = {**new, "metadata": {**new["metadata"], "resourceVersion": version}}
    refused = refusal(
        lambda: custom.replace_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            plural_name,
            name,
            sent,
            dry_run="All",
            field_validation="Strict",
        )
    )
    assert_agree(new, check(new, old), refused)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, {"admin": False, "defaultTopicPerm": "DENY", "defaultGroupPerm": "DENY"}),
        (
            {"rotation": {"token": "1"}},
            {
                "admin": False,
                "defaultTopicPerm": "DENY",
                "defaultGroupPerm": "DENY",
                "rotation": {"token": "1", "windowSeconds": 600},
            },
        ),
    ],
    ids=["without rotation", "with rotation"],
)
def test_a_user_is_stored_with_its_defaults(
    server: tuple[Any, str], spec: Object, expected: Object
) -> None:
    """Created for real: the API server stores the CRD's defaults, as check() applies them;
    rotation's window only when rotation is given."""
    custom, namespace = server
    name = f"defaults-{len(spec)}"
    document = user(name, **spec)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "users", document)
    assert created["spec"] == {"cluster": "orders", **expected}
    stored, problems = checked(document)
    assert problems == []
    assert created["spec"] == stored["spec"]
