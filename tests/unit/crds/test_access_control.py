"""The CRDs' access control: a BrokerCluster's spec.accessControl and spec.tls (and their rules,
checked by embedded mode's validator as the API server checks them), the User kind, and the
Users a Topic or ConsumerGroup names; their bounds agree with what the ACL file accepts."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.access.acl import KEY_MIN_LENGTH, parse_perm
from reconsume.access.addresses import parse_address_pattern
from reconsume.apiserver.validation import check
from reconsume.errors import InvalidArgumentError
from reconsume.message import names

from .schema import defaulted, load_crds, root_schema, walk

CRDS = load_crds()
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
PERMS = ["DENY", "PUB", "SUB", "PUB|SUB"]


def node(kind: str, path: str) -> dict[str, Any]:
    return dict(walk(root_schema(CRDS[kind])))[path]


def rules(kind: str, path: str) -> list[dict[str, Any]]:
    return list(node(kind, path).get("x-kubernetes-validations", ()))


def obj(kind: str, spec: dict[str, Any], name: str = "orders") -> dict[str, Any]:
    return {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster(**spec: Any) -> dict[str, Any]:
    return obj("BrokerCluster", spec)


def external(**spec: Any) -> dict[str, Any]:
    return cluster(external={"nameServer": "ns:9876"}, **spec)


def user(**spec: Any) -> dict[str, Any]:
    return obj("User", {"cluster": "orders", **spec}, name="orders-app")


def problems(document: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """What check() refuses, by field; without the API server's note that the CEL rules were
    not run on an object the schema refuses (path "")."""
    return [(p.path, p.message) for p in check(document, old) if p.path]


# ------------------------------------------------------------------------ BrokerCluster
ADMIN_SECRET_RULE = next(
    r for r in rules("BrokerCluster", ".spec") if r.get("fieldPath") == ".accessControl.adminSecret"
)
ADDRESSES_RULE = next(
    r
    for r in rules("BrokerCluster", ".spec")
    if r.get("fieldPath") == ".accessControl.allowedAddresses"
)


def test_the_access_control_rules_name_their_field() -> None:
    assert ADMIN_SECRET_RULE["message"].startswith("spec.accessControl.adminSecret is required")
    assert "external" in ADMIN_SECRET_RULE["message"]
    assert ADDRESSES_RULE["message"].startswith("spec.accessControl.allowedAddresses applies only")
    # No default: absent means on for an operator-run cluster, off for an external one, which
    # the schema cannot express; the rule reads an absent enabled as off.
    assert "default" not in node("BrokerCluster", ".spec.accessControl.enabled")
    assert "!has(self.accessControl.enabled)" in ADMIN_SECRET_RULE["rule"]


ADMIN_SECRET = ("spec.accessControl.adminSecret", " ".join(ADMIN_SECRET_RULE["message"].split()))
ADDRESSES = ("spec.accessControl.allowedAddresses", " ".join(ADDRESSES_RULE["message"].split()))
CLUSTERS = [
    ("operator-run, on, no admin Secret", cluster(accessControl={"enabled": True}), None),
    ("operator-run, default", cluster(accessControl={}), None),
    ("operator-run, addresses", cluster(accessControl={"allowedAddresses": ["10.0.0.*"]}), None),
    ("external, no access control", external(), None),
    ("external, enabled absent", external(accessControl={}), None),
    ("external, off", external(accessControl={"enabled": False}), None),
    (
        "external, on with its admin Secret",
        external(accessControl={"enabled": True, "adminSecret": "legacy-admin"}),
        None,
    ),
    ("external, on without admin Secret", external(accessControl={"enabled": True}), ADMIN_SECRET),
    ("external, no addresses", external(accessControl={"allowedAddresses": []}), None),
    ("external, addresses", external(accessControl={"allowedAddresses": ["*"]}), ADDRESSES),
]


@pytest.mark.parametrize(
    ("document", "refused"), [(d, r) for _, d, r in CLUSTERS], ids=[c for c, *_ in CLUSTERS]
)
def test_access_control_of_operator_run_and_external_clusters(
    document: dict[str, Any], refused: tuple[str, str] | None
) -> None:
    assert problems(document) == ([] if refused is None else [refused])


def test_tls_defaults_and_enums() -> None:
    schema = root_schema(CRDS["BrokerCluster"])
    spec = defaulted(schema, cluster(tls={"secretName": "orders-tls"}))["spec"]
    assert spec["tls"] == {"secretName": "orders-tls", "mode": "Enforcing", "clientAuth": "None"}
    assert node("BrokerCluster", ".spec.tls.mode")["enum"] == ["Permissive", "Enforcing"]
    assert node("BrokerCluster", ".spec.tls.clientAuth")["enum"] == ["None", "Optional", "Required"]
    assert "tls" not in defaulted(schema, cluster())["spec"]
    assert "accessControl" not in defaulted(schema, cluster())["spec"]
    assert problems(cluster(tls={"secretName": "orders-tls", "mode": "Disabled"}))[0][0] == (
        "spec.tls.mode"
    )
    assert problems(cluster(tls={"mode": "Permissive"}))[0][0] == "spec.tls.secretName"
    assert problems(external(tls={"secretName": "ca", "clientAuth": "Required"})) == []


def test_tls_modes_are_the_servers_own() -> None:
    """The CRD's modes are the servers' --tls-mode values but disabled (spec.tls absent), its
    client authentication their --tls-client-auth values."""
    mode = node("BrokerCluster", ".spec.tls.mode")["enum"]
    assert [m.lower() for m in mode] == ["permissive", "enforcing"]
    auth = node("BrokerCluster", ".spec.tls.clientAuth")["enum"]
    assert [a.lower() for a in auth] == ["none", "optional", "required"]


def test_status_shows_the_applied_access_control() -> None:
    status = node("BrokerCluster", ".status.accessControl")["properties"]
    assert list(status) == ["enabled", "adminSecret", "aclSecret", "accounts", "digest"]
    assert status["digest"]["maxLength"] == 64
    assert status["accounts"]["minimum"] == 0


# ------------------------------------------------------------------------ secret names
SECRET_NAMES = [
    ("BrokerCluster", ".spec.accessControl.adminSecret"),
    ("BrokerCluster", ".spec.tls.secretName"),
    ("User", ".spec.secretName"),
]
USER_LISTS = [
    ("Topic", ".spec.producers"),
    ("Topic", ".spec.consumers"),
    ("ConsumerGroup", ".spec.consumers"),
]


@pytest.mark.parametrize(("kind", "path"), SECRET_NAMES)
def test_secret_names_are_dns_subdomains(kind: str, path: str) -> None:
    field = node(kind, path)
    assert (field["pattern"], field["minLength"], field["maxLength"]) == (DNS_SUBDOMAIN, 1, 253)
    # The same pattern as a DeadLetterJob's consumerGroup, which names a resource too.
    assert node("DeadLetterJob", ".spec.consumerGroup")["pattern"] == DNS_SUBDOMAIN


@pytest.mark.parametrize(("kind", "path"), USER_LISTS)
def test_user_lists_are_sets_of_resource_names(kind: str, path: str) -> None:
    field = node(kind, path)
    assert (field["type"], field["maxItems"], field["x-kubernetes-list-type"]) == (
        "array",
        256,
        "set",
    )
    item = field["items"]
    assert (item["pattern"], item["minLength"], item["maxLength"]) == (DNS_SUBDOMAIN, 1, 253)
    assert "default" not in field
    assert "Users" in field["description"]


def test_user_lists_refuse_duplicates_and_bad_names() -> None:
    topic = obj("Topic", {"cluster": "orders", "producers": ["a", "a"]})
    assert problems(topic) == [("spec.producers[1]", 'Duplicate value: "a"')]
    group = obj("ConsumerGroup", {"cluster": "orders", "consumers": ["Orders"]}, name="g")
    assert [path for path, _ in problems(group)] == ["spec.consumers[0]"]
    many = obj("Topic", {"cluster": "orders", "consumers": [f"u{i}" for i in range(257)]})
    assert [path for path, _ in problems(many)] == ["spec.consumers"]
    fine = obj("Topic", {"cluster": "orders", "producers": ["a.b", "c"], "consumers": ["c"]})
    assert problems(fine) == []


# ------------------------------------------------------------------------ addresses
ADDRESS_FIELDS = [
    ("BrokerCluster", ".spec.accessControl.allowedAddresses[*]"),
    ("User", ".spec.allowedAddress"),
]
DOCUMENTED = [
    "*",
    "*.*.*.*",
    "192.168.1.*",
    "192.168.0-15.*",
    "10.*",
    "192.168.1.{1,7,9}",
    "10.0.0.1,10.0.0.2",
    "10.0.0.1",
    "::1",
    "2001:db8::ff00:42:8329",
]


@pytest.mark.parametrize(("kind", "path"), ADDRESS_FIELDS)
def test_address_patterns_allow_what_the_acl_file_reads(kind: str, path: str) -> None:
    field = node(kind, path)
    assert (field["minLength"], field["maxLength"]) == (1, 64)
    for text in DOCUMENTED:
        assert re.fullmatch(field["pattern"], text), text
        parse_address_pattern(text, "test")
    # CIDR is not RocketMQ's: refused by the pattern, as by the ACL file.
    assert not re.fullmatch(field["pattern"], "10.0.0.0/8")
    with pytest.raises(InvalidArgumentError):
        parse_address_pattern("10.0.0.0/8", "test")


@given(st.ip_addresses())
def test_every_address_matches_the_pattern(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    pattern = node("User", ".spec.allowedAddress")["pattern"]
    text = str(address)
    assert re.fullmatch(pattern, text)
    assert parse_address_pattern(text, "test").matches(text)


def test_allowed_addresses_are_bounded() -> None:
    addresses = node("BrokerCluster", ".spec.accessControl.allowedAddresses")
    assert addresses["maxItems"] == 64
    too_many = cluster(accessControl={"allowedAddresses": [f"10.0.0.{i}" for i in range(65)]})
    assert [path for path, _ in problems(too_many)] == ["spec.accessControl.allowedAddresses"]
    cidr = cluster(accessControl={"allowedAddresses": ["10.0.0.0/8"]})
    assert [path for path, _ in problems(cidr)] == ["spec.accessControl.allowedAddresses[0]"]


# ------------------------------------------------------------------------ User
def test_user_names_and_columns() -> None:
    crd = CRDS["User"]
    names_ = crd["spec"]["names"]
    assert (names_["kind"], names_["plural"], names_["singular"]) == ("User", "users", "user")
    assert (names_["shortNames"], names_["categories"]) == (["ruser"], ["reconsume"])
    (version,) = crd["spec"]["versions"]
    shown = [
        (c["name"], c["jsonPath"], c.get("priority", 0))
        for c in version["additionalPrinterColumns"]
    ]
    assert shown == [
        ("Cluster", ".spec.cluster", 0),
        ("Admin", ".spec.admin", 0),
        ("Secret", ".status.secretName", 0),
        ("Ready", '.status.conditions[?(@.type=="Ready")].status', 0),
        ("AccessKey", ".status.accessKey", 1),
        ("Reason", '.status.conditions[?(@.type=="Ready")].reason', 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ]


def test_user_cluster_is_named_as_by_a_topic() -> None:
    ours = {k: v for k, v in node("User", ".spec.cluster").items() if k != "description"}
    topic = {k: v for k, v in node("Topic", ".spec.cluster").items() if k != "description"}
    assert ours == topic
    assert root_schema(CRDS["User"])["properties"]["spec"]["required"] == ["cluster"]


def test_user_cluster_is_immutable() -> None:
    (rule,) = rules("User", ".spec.cluster")
    assert problems(user(cluster="other"), user()) == [("spec.cluster", rule["message"])]
    assert problems(user(admin=True), user()) == []


def test_a_minimal_user_gets_the_documented_defaults() -> None:
    schema = root_schema(CRDS["User"])
    spec = defaulted(schema, user())["spec"]
    assert spec == {
        "cluster": "orders",
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "DENY",
    }
    spec = defaulted(schema, user(rotation={"token": "2"}))["spec"]
    assert spec["rotation"] == {"token": "2", "windowSeconds": 600}
    assert problems(user()) == []


@pytest.mark.parametrize(
    "path",
    [
        ".spec.defaultTopicPerm",
        ".spec.defaultGroupPerm",
        ".spec.topics[*].perm",
        ".spec.groups[*].perm",
    ],
)
def test_user_perms_are_the_acl_files(path: str) -> None:
    field = node("User", path)
    assert field["enum"] == PERMS
    for perm in field["enum"]:
        parse_perm(perm, "test")


def test_user_permissions_are_lists_keyed_by_name() -> None:
    for path in (".spec.topics", ".spec.groups"):
        field = node("User", path)
        assert (field["maxItems"], field["x-kubernetes-list-type"]) == (256, "map")
        assert field["x-kubernetes-list-map-keys"] == ["name"]
        item = field["items"]
        assert item["required"] == ["name", "perm"]
        name = item["properties"]["name"]
        assert (name["pattern"], name["maxLength"]) == (names.NAME_PATTERN, names.TOPIC_MAX_LENGTH)
    duplicate = user(topics=[{"name": "a", "perm": "PUB"}, {"name": "a", "perm": "SUB"}])
    assert [path for path, _ in problems(duplicate)] == ["spec.topics[1]"]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"topics": [{"name": "orders", "perm": "READ"}]}, "spec.topics[0].perm"),
        ({"groups": [{"name": "GID_orders", "perm": "pub"}]}, "spec.groups[0].perm"),
        ({"defaultTopicPerm": "ANY"}, "spec.defaultTopicPerm"),
        ({"topics": [{"name": "a b", "perm": "SUB"}]}, "spec.topics[0].name"),
        ({"topics": [{"name": "orders"}]}, "spec.topics[0].perm"),
        ({"rotation": {"token": "t" * 64}}, "spec.rotation.token"),
        ({"rotation": {"windowSeconds": 86401}}, "spec.rotation.windowSeconds"),
        ({"rotation": {"windowSeconds": -1}}, "spec.rotation.windowSeconds"),
        ({"secretName": "Orders_App"}, "spec.secretName"),
        ({"allowedAddress": "10.0.0.0/8"}, "spec.allowedAddress"),
        ({"cluster": "Orders"}, "spec.cluster"),
    ],
)
def test_invalid_users_are_refused_naming_the_field(spec: dict[str, Any], path: str) -> None:
    assert [found for found, _ in problems(user(**spec))] == [path]


def test_a_full_user_is_valid() -> None:
    document = user(
        secretName="orders-app-keys",
        admin=False,
        defaultTopicPerm="SUB",
        defaultGroupPerm="DENY",
        topics=[{"name": "orders", "perm": "PUB|SUB"}, {"name": "%RETRY%x", "perm": "DENY"}],
        groups=[{"name": "GID_orders", "perm": "SUB"}],
        allowedAddress="10.244.*.*",
        rotation={"token": "t" * 63, "windowSeconds": 0},
    )
    assert problems(document) == []


def test_user_status_holds_the_keys_the_acl_file_accepts() -> None:
    for path in (".status.accessKey", ".status.previousAccessKey"):
        assert node("User", path)["maxLength"] >= KEY_MIN_LENGTH
    assert node("User", ".status.previousExpiresAt")["format"] == "date-time"
    assert node("User", ".status.brokers")["items"]["required"] == ["name"]
