"""Manifests checked as the API server checks them, without one: the examples pass, every CEL
rule of every CRD refuses what it should (with the exact path and message) and accepts the
rest, transition rules run only on updates, names and envelopes are checked, and the CEL
rules wait for the problems that bound their cost. tests/k8s/test_apiserver_validation.py
compares the same checks with a real API server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconsume.apiserver import crds
from reconsume.apiserver.rules import join_field_path, rule_problems
from reconsume.apiserver.schema import Problem, defaulted, validate, walk
from reconsume.apiserver.validation import NOT_CHECKED, check, checked
from reconsume.embedded.cron import MACROS

from .network_policy_cases import NETWORK_POLICY_CEL_CASES

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

Object = dict[str, Any]


def obj(kind: str, name: str, spec: Object) -> Object:
    return {"apiVersion": crds.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def group(name: str = "orders-consumer", **spec: Any) -> Object:
    return obj("ConsumerGroup", name, {"cluster": "orders", **spec})


def topic(name: str = "orders", **spec: Any) -> Object:
    return obj("Topic", name, {"cluster": "orders", **spec})


def cluster(**spec: Any) -> Object:
    return obj("BrokerCluster", "orders", spec)


def job(**spec: Any) -> Object:
    return obj("DeadLetterJob", "drain", {"consumerGroup": "orders-consumer", **spec})


def user(**spec: Any) -> Object:
    return obj("User", "orders-app", {"cluster": "orders", **spec})


def external(**spec: Any) -> Object:
    return cluster(external={"nameServer": "ns:9876"}, **spec)


def policy(**fields: Any) -> dict[str, Any]:
    return {"policy": fields}


EXPONENTIAL = {"type": "Exponential", "initial": "1s", "max": "1m", "multiplier": 2}


def message_of(kind: str, path: str, rule_text: str) -> str:
    """The message of the rule of ``kind`` at ``path`` whose text starts with ``rule_text``."""
    for found, node in walk(crds.root_schema(kind)):
        for rule in node.get("x-kubernetes-validations", ()):
            if found == path and rule["rule"].startswith(rule_text):
                return str(rule["message"]).strip()
    raise AssertionError(f"no rule {rule_text!r} at {kind} {path}")


# --------------------------------------------------------------------------------- examples
def test_there_is_an_example_of_every_kind() -> None:
    kinds = {yaml.safe_load(path.read_text())["kind"] for path in EXAMPLES}
    assert kinds == set(crds.KINDS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_valid(path: Path) -> None:
    assert check(yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("macro", sorted(MACROS))
def test_every_cron_macro_embedded_mode_runs_is_a_schedule_the_crd_accepts(macro: str) -> None:
    assert check(job(action="Purge", schedule=macro)) == []


def test_checked_returns_the_defaulted_object_and_leaves_the_document_alone() -> None:
    document = group(retry=None)
    before = copy.deepcopy(document)
    stored, problems = checked(document)
    assert problems == []
    assert document == before
    assert stored["spec"]["retry"] == {
        "queueNums": 1,
        "maxTimes": 16,
        "policy": {"type": "DelayLevels"},
    }
    assert stored["spec"]["deletionPolicy"] == "Retain"


# ---------------------------------------------------------------------------------- CEL rules
CEL_CASES: list[tuple[str, Object, Object, Object | None, str, tuple[str, str, str]]] = [
    # (id, violating, satisfying, old, path, (kind, rule node, rule text))
    (
        "group name required for a metadata.name that is no group name",
        group("orders.consumer"),
        group("orders.consumer", groupName="orders"),
        None,
        "spec.groupName",
        ("ConsumerGroup", "", "has(self.spec.groupName)"),
    ),
    (
        "group name required for a metadata.name over 120 characters",
        group("g" * 121),
        group("g" * 120),
        None,
        "spec.groupName",
        ("ConsumerGroup", "", "has(self.spec.groupName)"),
    ),
    (
        "Customized without delays",
        group(retry=policy(type="Customized")),
        group(retry=policy(type="Customized", delays=["1s"])),
        None,
        "spec.retry.policy.delays",
        ("ConsumerGroup", "spec.retry.policy", "self.type != 'Customized'"),
    ),
    (
        "delays without Customized",
        group(retry=policy(delays=["1s"])),
        group(retry=policy(type="DelayLevels")),
        None,
        "spec.retry.policy.delays",
        ("ConsumerGroup", "spec.retry.policy", "self.type == 'Customized'"),
    ),
    (
        "Exponential without multiplier",
        group(retry=policy(type="Exponential", initial="1s", max="1m")),
        group(retry=policy(**EXPONENTIAL)),
        None,
        "spec.retry.policy",
        ("ConsumerGroup", "spec.retry.policy", "self.type != 'Exponential'"),
    ),
    (
        "initial without Exponential",
        group(retry=policy(type="DelayLevels", initial="1s")),
        group(retry=policy(type="DelayLevels")),
        None,
        "spec.retry.policy",
        ("ConsumerGroup", "spec.retry.policy", "self.type == 'Exponential'"),
    ),
    (
        "max shorter than initial",
        group(retry=policy(**{**EXPONENTIAL, "initial": "2d", "max": "47h"})),
        group(retry=policy(**{**EXPONENTIAL, "initial": "2d", "max": "48h"})),
        None,
        "spec.retry.policy.max",
        ("ConsumerGroup", "spec.retry.policy", "!has(self.initial)"),
    ),
    (
        "max in ms shorter than initial in s",
        group(retry=policy(**{**EXPONENTIAL, "initial": "1s", "max": "999ms"})),
        group(retry=policy(**{**EXPONENTIAL, "initial": "1s", "max": "1000ms"})),
        None,
        "spec.retry.policy.max",
        ("ConsumerGroup", "spec.retry.policy", "!has(self.initial)"),
    ),
    (
        "groupName added",
        group(groupName="orders"),
        group(),
        group(),
        "spec.groupName",
        ("ConsumerGroup", "spec", "has(self.groupName)"),
    ),
    (
        "groupName removed",
        group(),
        group(groupName="orders"),
        group(groupName="orders"),
        "spec.groupName",
        ("ConsumerGroup", "spec", "has(self.groupName)"),
    ),
    (
        "groupName changed",
        group(groupName="b"),
        group(groupName="a"),
        group(groupName="a"),
        "spec.groupName",
        ("ConsumerGroup", "spec.groupName", "self == oldSelf"),
    ),
    (
        "cluster of a group changed",
        group(cluster="other"),
        group(),
        group(),
        "spec.cluster",
        ("ConsumerGroup", "spec.cluster", "self == oldSelf"),
    ),
    (
        "topic name required for a metadata.name that is no topic name",
        topic("orders.eu"),
        topic("orders.eu", topicName="orders_eu"),
        None,
        "spec.topicName",
        ("Topic", "", "has(self.spec.topicName)"),
    ),
    (
        "a retry topic as Topic",
        topic(topicName="%RETRY%orders"),
        topic(topicName="RETRY_orders"),
        None,
        "spec.topicName",
        ("Topic", "spec.topicName", "!self.startsWith('%RETRY%')"),
    ),
    (
        "a system topic as Topic",
        topic(topicName="TBW102"),
        topic(topicName="TBW103"),
        None,
        "spec.topicName",
        ("Topic", "spec.topicName", "!self.startsWith('%RETRY%')"),
    ),
    (
        "topicName added",
        topic(topicName="orders"),
        topic(),
        topic(),
        "spec.topicName",
        ("Topic", "spec", "has(self.topicName)"),
    ),
    (
        "topicName changed",
        topic(topicName="b"),
        topic(topicName="a"),
        topic(topicName="a"),
        "spec.topicName",
        ("Topic", "spec.topicName", "self == oldSelf"),
    ),
    (
        "cluster of a topic changed",
        topic(cluster="other"),
        topic(queues=4),
        topic(),
        "spec.cluster",
        ("Topic", "spec.cluster", "self == oldSelf"),
    ),
    (
        "external added",
        cluster(external={"nameServer": "ns:9876"}),
        cluster(brokers=3),
        cluster(),
        "spec.external",
        ("BrokerCluster", "spec", "has(self.external)"),
    ),
    (
        "storage added with another size",
        cluster(storage={"size": "20Gi"}),
        cluster(storage={"size": "10Gi"}),
        cluster(),
        "spec.storage",
        ("BrokerCluster", "spec", "has(self.storage)"),
    ),
    (
        "storage size changed",
        cluster(storage={"size": "20Gi"}),
        cluster(storage={"size": "10Gi"}, brokers=3),
        cluster(storage={"size": "10Gi"}),
        "spec.storage.size",
        ("BrokerCluster", "spec.storage.size", "self == oldSelf"),
    ),
    (
        "storage class added",
        cluster(storage={"storageClassName": "fast"}),
        cluster(storage={"storageClassName": None}),
        cluster(storage={}),
        "spec.storage.storageClassName",
        ("BrokerCluster", "spec.storage", "has(self.storageClassName)"),
    ),
    (
        "storage class changed",
        cluster(storage={"storageClassName": "slow"}),
        cluster(storage={"storageClassName": "fast"}),
        cluster(storage={"storageClassName": "fast"}),
        "spec.storage.storageClassName",
        ("BrokerCluster", "spec.storage.storageClassName", "self == oldSelf"),
    ),
    (
        "access control on for an external cluster without its admin Secret",
        external(accessControl={"enabled": True}),
        external(accessControl={"enabled": True, "adminSecret": "legacy-admin"}),
        None,
        "spec.accessControl.adminSecret",
        (
            "BrokerCluster",
            "spec",
            "!has(self.external) || !has(self.accessControl) || !has(self.accessControl.enabled)",
        ),
    ),
    (
        "allowed addresses on an external cluster",
        external(accessControl={"allowedAddresses": ["10.0.0.*"]}),
        cluster(accessControl={"allowedAddresses": ["10.0.0.*"]}),
        None,
        "spec.accessControl.allowedAddresses",
        (
            "BrokerCluster",
            "spec",
            "!has(self.external) || !has(self.accessControl) ||"
            " !has(self.accessControl.allowedAddresses)",
        ),
    ),
    (
        "cluster of a user changed",
        user(cluster="other"),
        user(admin=True),
        user(),
        "spec.cluster",
        ("User", "spec.cluster", "self == oldSelf"),
    ),
    (
        "Drain without sink",
        job(action="Drain"),
        job(action="Drain", sink={"path": "file:///dlq/"}),
        None,
        "spec.sink",
        ("DeadLetterJob", "spec", "!has(self.action) || self.action != 'Drain'"),
    ),
    (
        "a sink on Purge",
        job(action="Purge", sink={"path": "file:///dlq/"}),
        job(action="Purge"),
        None,
        "spec.sink",
        ("DeadLetterJob", "spec", "!has(self.action) || self.action == 'Drain'"),
    ),
    (
        "a target on Drain",
        job(action="Drain", sink={"path": "x"}, target={"topic": "t"}),
        job(action="Reprocess", target={"topic": "t"}),
        None,
        "spec.target",
        ("DeadLetterJob", "spec", "!has(self.action) || self.action == 'Reprocess'"),
    ),
    (
        "consumerGroup changed",
        job(action="Purge", consumerGroup="other"),
        job(action="Purge", dryRun=True),
        job(action="Purge"),
        "spec.consumerGroup",
        ("DeadLetterJob", "spec.consumerGroup", "self == oldSelf"),
    ),
    (
        "action changed",
        job(action="Reprocess"),
        job(action="Purge"),
        job(action="Purge"),
        "spec.action",
        ("DeadLetterJob", "spec.action", "self == oldSelf"),
    ),
    *NETWORK_POLICY_CEL_CASES,
]


@pytest.mark.parametrize(
    ("violating", "satisfying", "old", "path", "rule"),
    [case[1:] for case in CEL_CASES],
    ids=[case[0] for case in CEL_CASES],
)
def test_each_cel_rule_refuses_naming_the_field_and_accepts_the_rest(
    violating: Object,
    satisfying: Object,
    old: Object | None,
    path: str,
    rule: tuple[str, str, str],
) -> None:
    assert check(violating, old) == [Problem(path, message_of(*rule))]
    assert check(satisfying, old) == []


def test_every_cel_rule_has_a_case() -> None:
    covered = {case[5] for case in CEL_CASES}
    for kind in crds.KINDS:
        for path, node in walk(crds.root_schema(kind)):
            for rule in node.get("x-kubernetes-validations", ()):
                assert any(
                    (k, p) == (kind, path) and rule["rule"].startswith(text)
                    for k, p, text in covered
                ), (kind, path, rule["rule"])


def test_transition_rules_run_only_on_updates() -> None:
    assert check(group(groupName="b")) == []
    assert check(job(action="Purge", consumerGroup="other")) == []


def test_a_transition_rule_needs_the_old_value_at_its_node() -> None:
    # the old object has no groupName: "spec.groupName is immutable" cannot run, the rule on
    # spec (added or removed) does
    problems = check(group(groupName="b"), group())
    assert problems == [
        Problem("spec.groupName", message_of("ConsumerGroup", "spec", "has(self.groupName)"))
    ]


def test_an_update_reports_every_change_and_the_other_rules() -> None:
    problems = check(job(action="Drain", consumerGroup="x"), job(action="Purge"))
    assert [p.path for p in problems] == ["spec.sink", "spec.consumerGroup", "spec.action"]


def test_an_update_may_not_change_the_name_or_kind() -> None:
    assert check(group("b"), group("a")) == [
        Problem("metadata.name", 'Invalid value: "b": field is immutable')
    ]
    assert check({**group(), "kind": "Topic"}, group())[0].path == "kind"


def test_an_update_may_name_the_namespace_it_is_applied_to() -> None:
    named = with_namespace(group(), "team-a")
    assert check(named, group()) == []
    assert check(group(), named) == []
    assert check(named, with_namespace(group(), "team-b")) == [
        Problem("metadata.namespace", 'Invalid value: "team-a": field is immutable')
    ]


def with_namespace(document: Object, namespace: str) -> Object:
    return {**document, "metadata": {**document["metadata"], "namespace": namespace}}


def test_schema_problems_and_rules_are_reported_together_when_nothing_blocks() -> None:
    document = group("a.b", retry={"queueNums": 65, "policy": {"type": "Customized"}})
    assert [p.path for p in check(document)] == [
        "spec.retry.queueNums",
        "spec.groupName",
        "spec.retry.policy.delays",
    ]


@pytest.mark.parametrize(
    ("document", "path"),
    [
        (cluster(brokers="two"), "spec.brokers"),
        (group("a.b", messageModel="Queue"), "spec.messageModel"),
        (group("a.b", groupName="g" * 121), "spec.groupName"),
        (group("a.b", subscriptions=[{"topic": f"t{i}"} for i in range(65)]), "spec.subscriptions"),
        (job(action="Drain", sink={}), "spec.sink.path"),
        (obj("ConsumerGroup", "a.b", {}), "spec.cluster"),
    ],
)
def test_problems_bounding_the_rules_cost_keep_them_from_running(
    document: Object, path: str
) -> None:
    problems = check(document)
    assert [p.path for p in problems] == [path, ""]
    assert problems[-1].message == NOT_CHECKED


# -------------------------------------------------------------------------- schema problems
@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            group(retry={"maxTimes": -2}),
            ("spec.retry.maxTimes", "Invalid value: -2: should be greater than or equal to -1"),
        ),
        (
            cluster(flush="Never"),
            ("spec.flush", 'Unsupported value: "Never": supported values: "Async", "Sync"'),
        ),
        (group(extra=1), ("spec.extra", "unknown field")),
        (topic(queues=2.5), ("spec.queues", 'Invalid value: "number": must be of type integer')),
        (group(cluster=""), ("spec.cluster", 'Invalid value: "": should be at least 1 chars long')),
        (
            cluster(storage={"size": "10 GB"}),
            (
                "spec.storage.size",
                'Invalid value: "10 GB": should match '
                "'^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$'",
            ),
        ),
        (
            group(subscriptions=[{"topic": "a"}, {"topic": "a", "type": "SQL92"}]),
            ("spec.subscriptions[1]", 'Duplicate value: {"topic": "a"}'),
        ),
        (
            job(action="Purge", spark={"conf": {"spark.x": 1}}),
            ("spec.spark.conf.spark.x", 'Invalid value: "integer": must be of type string'),
        ),
        (
            group(retry=policy(type="Customized", delays=["1s\n"])),
            (
                "spec.retry.policy.delays[0]",
                "Invalid value: \"1s\\n\": should match '^[1-9][0-9]{0,8}(ms|s|m|h|d)$'",
            ),
        ),
        (
            {
                **topic(),
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}
                    ]
                },
            },
            (
                "status.conditions[0].lastTransitionTime",
                'Invalid value: "yesterday": must be of type date-time',
            ),
        ),
    ],
)
def test_schema_problems_name_the_field(document: Object, expected: tuple[str, str]) -> None:
    assert Problem(*expected) in check(document)


def test_null_fields_are_dropped_before_defaulting_unless_nullable() -> None:
    stored, problems = checked(
        cluster(brokers=None, image=None, storage={"storageClassName": None})
    )
    assert problems == []
    assert stored["spec"]["brokers"] == 2
    assert "image" not in stored["spec"]
    assert stored["spec"]["storage"] == {"size": "10Gi", "storageClassName": None}


def test_integral_numbers_of_integer_fields_become_ints() -> None:
    stored, problems = checked(cluster(brokers=3.0))
    assert problems == []
    assert type(stored["spec"]["brokers"]) is int


def test_int_or_string_fields() -> None:
    requests = {"cpu": "500m", "memory": 2}
    assert check(cluster(resources={"requests": requests})) == []
    problems = check(cluster(resources={"requests": {"cpu": True}}))
    assert problems[0] == Problem(
        "spec.resources.requests.cpu", 'Invalid value: "boolean": must be of type integer,string'
    )


def test_a_schema_default_is_itself_defaulted_and_valid() -> None:
    for kind in crds.KINDS:
        for path, node in walk(crds.root_schema(kind)):
            if "default" in node:
                assert validate(node, defaulted(node, node["default"]), path) == [], path


# -------------------------------------------------------------------------- names, envelope
@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, ("metadata.name", "Required value: name or generateName is required")),
        (
            {"generateName": "orders-"},
            (
                "metadata.name",
                "Required value: name is required (generateName needs an API "
                "server to generate it)",
            ),
        ),
        (
            {"name": "Orders"},
            (
                "metadata.name",
                'Invalid value: "Orders": a lowercase RFC 1123 '
                "subdomain must consist of lower case alphanumeric characters, '-' "
                "or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
        ),
        (
            {"name": "a" * 254},
            ("metadata.name", f'Invalid value: "{"a" * 254}": must be no more than 253 characters'),
        ),
        ({"name": "-a"}, ("metadata.name", None)),
        ({"name": "a.", "namespace": "default"}, ("metadata.name", None)),
        ({"name": "a", "namespace": "Team_A"}, ("metadata.namespace", None)),
        ({"name": "a", "labels": {"a b": "x"}}, ("metadata.labels", None)),
        ({"name": "a", "labels": {"app": "x y"}}, ("metadata.labels", None)),
        ({"name": "a", "annotations": {"example.com/x/y": "z"}}, ("metadata.annotations", None)),
        ({"name": "a", "finalizers": ["bad finalizer"]}, ("metadata.finalizers", None)),
        ({"name": "a", "owner": "me"}, ("metadata.owner", "unknown field")),
        (
            {"name": "a", "labels": ["x"]},
            ("metadata.labels", 'Invalid value: "array": must be of type object'),
        ),
    ],
)
def test_metadata_is_checked_like_the_api_server(
    metadata: Object, expected: tuple[str, str | None]
) -> None:
    document = {**job(action="Purge"), "metadata": metadata}
    problems = check(document)
    assert expected[0] in [p.path for p in problems], problems
    if expected[1] is not None:
        assert Problem(expected[0], expected[1]) in problems


def test_names_labels_and_annotations_that_are_valid() -> None:
    metadata = {
        "name": "orders.eu-1",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/name": "orders", "tier": ""},
        "annotations": {"Example.com/Note": "anything at all"},
        "finalizers": ["example.com/cleanup"],
        "resourceVersion": "12",
        "generation": 3,
    }
    assert check({**job(action="Purge"), "metadata": metadata}) == []


def test_the_crds_name_bounds_apply_to_metadata_name() -> None:
    problems = check({**cluster(), "metadata": {"name": "orders.eu"}})
    assert problems == [
        Problem(
            "metadata.name",
            "Invalid value: \"orders.eu\": should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
        )
    ]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"kind": "Queue"},
            [
                Problem(
                    "kind",
                    'Unsupported value: "Queue": supported values: '
                    '"BrokerCluster", "ConsumerGroup", "Topic", '
                    '"DeadLetterJob", "User"',
                )
            ],
        ),
        (
            {"kind": None},
            [
                Problem(
                    "kind",
                    'Required value: one of "BrokerCluster", '
                    '"ConsumerGroup", "Topic", "DeadLetterJob", "User"',
                )
            ],
        ),
        (
            {"apiVersion": "reconsume.io/v1"},
            [
                Problem(
                    "apiVersion",
                    "Unsupported value: "
                    '"reconsume.io/v1": supported values: '
                    '"reconsume.io/v1alpha1"',
                )
            ],
        ),
        (
            {"apiVersion": None},
            [Problem("apiVersion", 'Required value: must be "reconsume.io/v1alpha1"')],
        ),
    ],
)
def test_wrong_kind_or_api_version(changes: Object, expected: list[Problem]) -> None:
    document = {**topic(queues=0), **changes}
    assert check(document) == expected


def test_problems_print_as_path_and_message() -> None:
    assert str(Problem("spec.brokers", "Required value")) == "spec.brokers: Required value"
    assert str(Problem("", "whole object")) == "whole object"


# ---------------------------------------------------------------- rules beyond what crds use
SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "items": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
                "x-kubernetes-validations": [
                    {"rule": "self.v >= oldSelf.v", "message": "v may only grow"}
                ],
            },
        },
        "conf": {
            "type": "object",
            "additionalProperties": {
                "type": "string",
                "x-kubernetes-validations": [{"rule": "self != 'bad'"}],
            },
        },
    },
    "x-kubernetes-validations": [
        {
            "rule": "self.a < 10",
            "messageExpression": "'a is ' + string(self.a) + ', over 9'",
            "message": "a too big",
            "fieldPath": ".a",
        },
        {"rule": "self.a != 5", "messageExpression": "self.nope", "message": "not five"},
        {"rule": "self.a != 6", "messageExpression": "'two\\nlines'"},
        {"rule": "self.missing > 0", "message": "  missing must be positive "},
        {"rule": "self.a", "message": "a as a bool"},
    ],
}


def test_message_expression_gives_the_message() -> None:
    problems = rule_problems(SCHEMA, {"a": 12})
    assert Problem("a", "a is 12, over 9") in problems


def test_a_message_expression_that_fails_or_spans_lines_falls_back() -> None:
    assert Problem("", "not five") in rule_problems(SCHEMA, {"a": 5})
    assert Problem("", "failed rule: self.a != 6") in rule_problems(SCHEMA, {"a": 6})


def test_an_evaluation_error_is_reported_at_the_node_as_the_api_server_does() -> None:
    problems = rule_problems(SCHEMA, {"a": 1})
    assert Problem("", "no such key: missing evaluating rule: missing must be positive") in problems
    assert Problem("", "rule gave 1, not a bool, evaluating rule: a as a bool") in problems


def test_map_values_are_checked_one_by_one_with_their_key_in_the_path() -> None:
    problems = rule_problems(SCHEMA, {"a": 1, "conf": {"x.y": "bad", "z": "good"}})
    assert Problem("conf.x.y", "failed rule: self != 'bad'") in problems
    assert not any(p.path == "conf.z" for p in problems)


def test_map_list_items_are_matched_to_old_items_by_key() -> None:
    old = {"a": 1, "items": [{"k": "x", "v": 5}, {"k": "y", "v": 1}]}
    new = {"a": 1, "items": [{"k": "y", "v": 2}, {"k": "x", "v": 4}, {"k": "z", "v": 0}]}
    problems = [p for p in rule_problems(SCHEMA, new, old) if p.path.startswith("items")]
    assert problems == [Problem("items[1]", "v may only grow")]


@pytest.mark.parametrize(
    ("field_path", "expected"),
    [
        (".spec.groupName", "spec.spec.groupName"),
        (".conf['a.b']", "spec.conf[a.b]"),
        (".items[2].name", "spec.items[2].name"),
    ],
)
def test_field_paths_join_the_node_path(field_path: str, expected: str) -> None:
    assert join_field_path("spec", field_path) == expected


def test_a_field_path_that_is_not_a_json_path_is_refused() -> None:
    with pytest.raises(ValueError, match="not a JSON path"):
        join_field_path("", "spec")
