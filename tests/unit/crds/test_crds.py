"""The CRDs in crds/: structural schemas, documented fields, CEL rules with messages, printer
columns that point into the schema, and bounds and patterns that agree with reconsume's own
rules (names, durations, delay levels, topology defaults). The API server's own checks (CEL
compilation and cost) run in tests/k8s."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import parse_delay_levels
from reconsume.message import durations, names
from reconsume.topology import model

from .schema import KINDS, load_crds, root_schema, walk

CRDS = load_crds()
SHORT_NAMES = {
    "BrokerCluster": "rbc",
    "ConsumerGroup": "rcg",
    "Topic": "rtopic",
    "DeadLetterJob": "dlj",
    "User": "ruser",
}
INT_OR_STRING_KEYS = {"anyOf", "x-kubernetes-int-or-string", "description"}


def spec_node(kind: str, path: str) -> dict[str, Any]:
    nodes = dict(walk(root_schema(CRDS[kind])))
    return nodes[path]


def test_one_file_per_kind() -> None:
    assert sorted(CRDS) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_names_scope_and_version(kind: str) -> None:
    crd = CRDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    spec = crd["spec"]
    plural = spec["names"]["plural"]
    assert crd["metadata"]["name"] == f"{plural}.reconsume.io"
    assert spec["group"] == "reconsume.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == [SHORT_NAMES[kind]]
    assert "reconsume" in spec["names"]["categories"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural(kind: str) -> None:
    for path, node in walk(root_schema(CRDS[kind])):
        if node.get("x-kubernetes-int-or-string"):
            assert set(node) <= INT_OR_STRING_KEYS, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node, f"{kind}{path} has no type"
        assert not ({"anyOf", "oneOf", "allOf", "not"} & set(node)), path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
        if node["type"] == "array":
            assert isinstance(node.get("items"), dict), path
        if "x-kubernetes-list-map-keys" in node:
            item = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", []) or "default" in item["properties"][key]


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_is_described(kind: str) -> None:
    for path, node in walk(root_schema(CRDS[kind])):
        if path == ".metadata":
            continue  # the API server allows nothing on metadata but name and generateName
        assert node.get("description", "").strip(), f"{kind}{path} has no description"


def stated(value: Any) -> str:
    """A default as a description states it: ``3``, ``true``, ``Async``, ``{}``,
    ``{type: DelayLevels}``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {stated(v)}" for k, v in value.items()) + "}"
    return str(value)


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_is_stated_in_its_description(kind: str) -> None:
    """``kubectl explain`` prints descriptions, not defaults: each description ends with its
    default."""
    defaults = [(path, node) for path, node in walk(root_schema(CRDS[kind])) if "default" in node]
    assert defaults
    for path, node in defaults:
        description = " ".join(node["description"].split())
        assert description.endswith(f"Default: {stated(node['default'])}."), (path, description)
        assert description.count("Default: ") == 1, (path, description)


def test_stating_a_default() -> None:
    assert [stated(v) for v in (3, False, "local[*]", {}, {"type": "DelayLevels"})] == [
        "3", "false", "local[*]", "{}", "{type: DelayLevels}",
    ]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_restricts_only_names(kind: str) -> None:
    metadata = root_schema(CRDS[kind])["properties"]["metadata"]
    assert set(metadata) <= {"type", "properties"}
    assert set(metadata.get("properties", {})) <= {"name", "generateName"}


def rules(kind: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [
        (path, node, rule)
        for path, node in walk(root_schema(CRDS[kind]))
        for rule in node.get("x-kubernetes-validations", ())
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_has_a_message_naming_its_field(kind: str) -> None:
    for path, node, rule in rules(kind):
        assert set(rule) <= {"rule", "message", "fieldPath", "reason", "messageExpression"}
        message = rule.get("message", "")
        assert message.strip(), f"{kind}{path}: {rule['rule']} has no message"
        fields = [path.rsplit(".", 1)[-1], *(node.get("properties") or {})]
        assert any(f"{name}" in message for name in fields if name), (path, message)
        if "fieldPath" in rule:
            target = rule["fieldPath"].lstrip(".")
            assert target.split(".")[-1] in message
            assert target.split(".")[0] in (node.get("properties") or {}), (path, target)


IMMUTABLE = {
    "BrokerCluster": {".spec.storage.size", ".spec.storage.storageClassName"},
    "ConsumerGroup": {".spec.cluster", ".spec.groupName"},
    "Topic": {".spec.cluster", ".spec.topicName"},
    "DeadLetterJob": {".spec.consumerGroup", ".spec.action"},
    "User": {".spec.cluster"},
}


@pytest.mark.parametrize("kind", sorted(IMMUTABLE))
def test_immutable_fields(kind: str) -> None:
    immutable = {
        path
        for path, _, rule in rules(kind)
        if rule["rule"] == "self == oldSelf" and "immutable" in rule["message"]
    }
    assert immutable == IMMUTABLE[kind]
    for path in immutable:
        assert path.rsplit(".", 1)[-1] in next(
            r["message"] for p, _, r in rules(kind) if p == path and "oldSelf" in r["rule"]
        )


def column_path(json_path: str) -> list[str]:
    """``.status.conditions[?(@.type=="Ready")].status`` -> status, conditions, [*], status."""
    simplified = re.sub(r"\[\?\(@\.[A-Za-z]+==\"[^\"]*\"\)\]", "[*]", json_path)
    parts: list[str] = []
    for segment in simplified.strip(".").split("."):
        if segment.endswith("[*]"):
            parts += [segment[:-3], "[*]"]
        else:
            parts.append(segment)
    return parts


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_point_into_the_schema(kind: str) -> None:
    (version,) = CRDS[kind]["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    names_ = [c["name"] for c in columns]
    assert names_[-1] == "Age"
    assert "Ready" in names_
    schema = root_schema(CRDS[kind])
    for column in columns:
        if column["jsonPath"] == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        assert column.get("description"), column
        union = NAME_UNION.fullmatch(column["jsonPath"])
        if union:  # the first of two fields among the top-level ones: every such is a string
            sections = [node.get("properties") or {} for node in schema["properties"].values()]
            found = [s[name] for name in union.groups() for s in sections if name in s]
            assert found, column
            assert all(node["type"] == column["type"] == "string" for node in found), column
            continue
        node = schema
        for part in column_path(column["jsonPath"]):
            node = node["items"] if part == "[*]" else node["properties"][part]
        expected = {"integer": "integer", "string": "string", "boolean": "boolean"}[node["type"]]
        assert column["type"] == expected, column
        assert column.get("description"), column


def test_ready_column_reads_the_ready_condition() -> None:
    for kind in KINDS:
        (version,) = CRDS[kind]["spec"]["versions"]
        ready = next(c for c in version["additionalPrinterColumns"] if c["name"] == "Ready")
        assert ready["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'


NAME_UNION = re.compile(r"\.\*\['([A-Za-z]+)','([A-Za-z]+)'\]")
"""``.*['groupName','name']``: JSONPath's wildcard over the object's top-level fields, then
the union of two keys, each key's matches in order: the first ``groupName`` found (in spec or
status), else the first ``name`` (metadata's). The API server shows the first match."""


def columns(kind: str) -> dict[str, dict[str, Any]]:
    (version,) = CRDS[kind]["spec"]["versions"]
    return {c["name"]: c for c in version["additionalPrinterColumns"]}


@pytest.mark.parametrize(("kind", "column", "field"), [
    ("ConsumerGroup", "Group", "groupName"),
    ("Topic", "Topic", "topicName"),
])  # fmt: skip
def test_the_name_columns_show_from_creation_on(kind: str, column: str, field: str) -> None:
    """The name on the brokers, spec.<field> else metadata.name, from creation on rather than
    from a status written at the first reconcile. The wildcard runs over every top-level field:
    only spec and status (its copy) may hold <field>, only metadata a name."""
    shown = columns(kind)[column]
    assert shown["jsonPath"] == f".*['{field}','name']"
    assert shown.get("priority", 0) == 0
    assert f"spec.{field}, else metadata.name" in shown["description"]
    sections = root_schema(CRDS[kind])["properties"]
    holding = {s for s, node in sections.items() if field in (node.get("properties") or {})}
    assert holding == {"spec", "status"}
    named = {s for s, node in sections.items() if "name" in (node.get("properties") or {})}
    assert named == {"metadata"}


def test_consumer_group_columns_show_retry_and_dlq_depth() -> None:
    (version,) = CRDS["ConsumerGroup"]["spec"]["versions"]
    paths = {c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert {".status.retryDepth", ".status.deadLetterDepth"} <= paths


def test_dead_letter_job_columns_show_phase_and_counts() -> None:
    (version,) = CRDS["DeadLetterJob"]["spec"]["versions"]
    paths = {c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert {".status.phase", ".status.counts.read", ".status.counts.matched"} <= paths


# ------------------------------------------------------------------ agreement with reconsume
def test_group_and_topic_names_follow_reconsume_rules() -> None:
    group = spec_node("ConsumerGroup", ".spec.groupName")
    topic = spec_node("Topic", ".spec.topicName")
    assert group["pattern"] == topic["pattern"] == names.NAME_PATTERN
    assert group["maxLength"] == names.MANAGED_GROUP_MAX_LENGTH == 120
    assert topic["maxLength"] == names.TOPIC_MAX_LENGTH
    subscription = spec_node("ConsumerGroup", ".spec.subscriptions[*].topic")
    assert (subscription["pattern"], subscription["maxLength"]) == (
        names.NAME_PATTERN,
        names.TOPIC_MAX_LENGTH,
    )
    root_rules = root_schema(CRDS["ConsumerGroup"])["x-kubernetes-validations"]
    assert names.NAME_PATTERN in root_rules[0]["rule"]
    assert f"<= {names.MANAGED_GROUP_MAX_LENGTH}" in root_rules[0]["rule"]


def test_durations_use_the_shared_pattern() -> None:
    policy = ".spec.retry.policy"
    for field in (f"{policy}.delays[*]", f"{policy}.initial", f"{policy}.max"):
        assert spec_node("ConsumerGroup", field)["pattern"] == durations.DURATION_PATTERN
    levels = spec_node("BrokerCluster", ".spec.delayLevels")
    assert levels["pattern"] == durations.DELAY_LEVELS_PATTERN
    assert parse_delay_levels(levels["default"])[:3] == (1_000, 5_000, 10_000)


@given(st.integers(1, 999_999_999), st.sampled_from(sorted(durations.UNIT_MS)))
def test_every_duration_the_crd_accepts_the_engine_parses_alike(amount: int, unit: str) -> None:
    text = f"{amount}{unit}"
    assert re.fullmatch(durations.DURATION_PATTERN, text)
    expected = amount * durations.UNIT_MS[unit]
    assert durations.parse_duration_ms(text) == expected
    assert parse_delay_levels(f"1s {text}") == (1_000, expected)


@given(st.text(alphabet="0123456789msdhx ", max_size=12))
def test_what_the_duration_pattern_refuses_is_not_a_duration(text: str) -> None:
    if not re.fullmatch(durations.DURATION_PATTERN, text):
        with pytest.raises(ValueError, match="duration"):
            durations.parse_duration_ms(text)


@given(
    st.lists(
        st.tuples(st.integers(1, 10**6), st.sampled_from(sorted(durations.UNIT_MS))),
        min_size=1,
        max_size=20,
    )
)
def test_delay_levels_the_crd_accepts_parse(levels: list[tuple[int, str]]) -> None:
    text = " ".join(f"{amount}{unit}" for amount, unit in levels)
    assert re.fullmatch(durations.DELAY_LEVELS_PATTERN, text)
    assert parse_delay_levels(text) == tuple(a * durations.UNIT_MS[u] for a, u in levels)


def test_defaults_and_bounds_match_topology() -> None:
    retry = ".spec.retry"
    queue_nums = spec_node("ConsumerGroup", f"{retry}.queueNums")
    assert (queue_nums["default"], queue_nums["minimum"], queue_nums["maximum"]) == (
        model.DEFAULT_RETRY_QUEUE_NUMS,
        0,
        model.MAX_RETRY_QUEUE_NUMS,
    )
    max_times = spec_node("ConsumerGroup", f"{retry}.maxTimes")
    assert (max_times["default"], max_times["minimum"], max_times["maximum"]) == (
        model.DEFAULT_RETRY_MAX_TIMES,
        -1,
        model.INT32_MAX,
    )
    assert spec_node("ConsumerGroup", f"{retry}.policy.delays")["maxItems"] == (
        model.MAX_CUSTOMIZED_DELAYS
    )
    assert spec_node("ConsumerGroup", f"{retry}.policy.multiplier")["maximum"] == (
        model.MAX_MULTIPLIER
    )
    queues = spec_node("Topic", ".spec.queues")
    assert (queues["default"], queues["maximum"]) == (
        model.DEFAULT_TOPIC_QUEUES,
        model.MAX_TOPIC_QUEUES,
    )
    assert spec_node("Topic", ".spec.perm")["enum"] == [p.value for p in model.Permission]
    assert spec_node("ConsumerGroup", ".spec.messageModel")["enum"] == [
        m.value for m in model.MessageModel
    ]
    for kind in ("ConsumerGroup", "Topic"):
        deletion = spec_node(kind, ".spec.deletionPolicy")
        assert deletion["enum"] == [p.value for p in model.DeletionPolicy]
        assert deletion["default"] == "Retain"
        assert "Retain" in deletion["description"]
        assert "force-delete" in deletion["description"]
