"""The BrokerCluster CRD's storage rules, checked by embedded mode's validator as the API
server checks them (tests/k8s/test_apiserver_validation.py compares the two): what the broker
StatefulSet's volume claim template is made of cannot change, an absent storage is the
defaults; and its other fields an external cluster ignores or the operator writes."""

from __future__ import annotations

from typing import Any

import pytest

from reconsume.apiserver.validation import check
from reconsume.topology.clusters import DEFAULT_STORAGE_SIZE

from .schema import defaulted, load_crds, root_schema, walk

CRDS = load_crds()


def spec_node(kind: str, path: str) -> dict[str, Any]:
    nodes = dict(walk(root_schema(CRDS[kind])))
    return nodes[path]


def rules(kind: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [
        (path, node, rule)
        for path, node in walk(root_schema(CRDS[kind]))
        for rule in node.get("x-kubernetes-validations", ())
    ]


def broker_cluster(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "orders"},
        "spec": spec,
    }


SIZE_MESSAGE = next(r["message"] for p, _, r in rules("BrokerCluster") if p == ".spec.storage.size")


def test_the_storage_rules_say_why_and_what_to_do_instead() -> None:
    storage = {p: r for p, _, r in rules("BrokerCluster") if "storage" in r["rule"]}
    assert set(storage) == {".spec", ".spec.storage"}
    for message in (SIZE_MESSAGE, *(r["message"] for r in storage.values())):
        assert "volume" in message
        assert "create a new BrokerCluster" in message
    assert "expand each broker's PersistentVolumeClaim" in SIZE_MESSAGE
    assert SIZE_MESSAGE.startswith("spec.storage.size is immutable: ")
    # An absent storage stands for these defaults in the rule and in the operator.
    size = spec_node("BrokerCluster", ".spec.storage.size")
    assert size["default"] == DEFAULT_STORAGE_SIZE
    assert f"self.storage.size == '{DEFAULT_STORAGE_SIZE}'" in storage[".spec"]["rule"]
    assert "default" not in spec_node("BrokerCluster", ".spec.storage")


def test_a_changed_size_is_refused_against_the_applied_object() -> None:
    applied = broker_cluster(storage={"size": "10Gi"})
    problems = check(broker_cluster(storage={"size": "20Gi"}), applied)
    assert [(p.path, p.message) for p in problems] == [("spec.storage.size", SIZE_MESSAGE)]
    assert check(applied, applied) == []


ACCEPTED = "accepted"
CLASS = "spec.storage.storageClassName"
STORAGE_UPDATES = [
    ("the same size again", {"size": "20Gi"}, {"size": "20Gi"}, ACCEPTED),
    ("added as the default size", None, {"size": "10Gi"}, ACCEPTED),
    ("added empty", None, {}, ACCEPTED),
    ("the default size removed", {"size": "10Gi"}, None, ACCEPTED),
    ("a null class removed", {"storageClassName": None}, {}, ACCEPTED),
    ("a null class removed with storage", {"storageClassName": None}, None, ACCEPTED),
    ("size changed", {"size": "10Gi"}, {"size": "20Gi"}, "spec.storage.size"),
    ("added with another size", None, {"size": "20Gi"}, "spec.storage"),
    ("another size removed", {"size": "20Gi"}, None, "spec.storage"),
    ("added with a class", None, {"storageClassName": "fast"}, "spec.storage"),
    ("class added", {}, {"storageClassName": "fast"}, CLASS),
    ("class removed", {"storageClassName": "fast"}, {}, CLASS),
    ("class changed", {"storageClassName": "a"}, {"storageClassName": "b"}, CLASS),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "refused_at"),
    [(old, new, at) for _, old, new, at in STORAGE_UPDATES],
    ids=[case for case, *_ in STORAGE_UPDATES],
)
def test_storage_changes_only_when_the_volumes_would_not(
    old: dict[str, Any] | None, new: dict[str, Any] | None, refused_at: str
) -> None:
    """What the broker StatefulSet's volume claim template is made of cannot change; an
    absent storage is the default size in the default class, so adding or removing exactly
    that is no change."""

    def cluster(storage: dict[str, Any] | None) -> dict[str, Any]:
        return broker_cluster() if storage is None else broker_cluster(storage=storage)

    assert check(cluster(old)) == []
    problems = check(cluster(new), cluster(old))
    if refused_at == ACCEPTED:
        assert problems == []
    else:
        assert [p.path for p in problems] == [refused_at], problems
        assert problems[0].message.startswith(refused_at), problems


def test_an_external_cluster_shows_no_storage() -> None:
    external = broker_cluster(external={"nameServer": "ns:9876"})
    stored = defaulted(root_schema(CRDS["BrokerCluster"]), external)
    assert "storage" not in stored["spec"]
    assert "nameServerResources" not in stored["spec"]


def without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    return node


def test_name_server_resources_are_validated_like_the_brokers() -> None:
    brokers = spec_node("BrokerCluster", ".spec.resources")
    name_servers = spec_node("BrokerCluster", ".spec.nameServerResources")
    assert without_descriptions(name_servers) == without_descriptions(brokers)
    assert "default" not in name_servers  # the operator's defaults, stated in the description
    for text in ("cpu 50m", "memory 64Mi", "memory 256Mi"):
        assert text in name_servers["description"]
    too_many = {"requests": {f"r{i}": 1 for i in range(17)}}
    problems = check(broker_cluster(nameServerResources=too_many))
    assert problems[0].path == "spec.nameServerResources.requests"
    problems = check(broker_cluster(nameServerResources={"limits": {"memory": True}}))
    assert problems[0].path == "spec.nameServerResources.limits.memory"
    assert check(broker_cluster(nameServerResources={"limits": {"cpu": 1, "memory": "1Gi"}})) == []


def test_the_brokers_column_counts_registered_brokers() -> None:
    """An external cluster ignores spec.brokers (defaulted to 2 all the same): the column shows
    what registered; the spec's count is the wide column Desired."""
    (version,) = CRDS["BrokerCluster"]["spec"]["versions"]
    shown = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert shown["Brokers"]["jsonPath"] == ".status.readyBrokers"
    assert shown["Brokers"].get("priority", 0) == 0
    assert shown["Desired"]["jsonPath"] == ".spec.brokers"
    assert shown["Desired"]["priority"] == 1
    ready = spec_node("BrokerCluster", ".status.readyBrokers")
    assert (ready["type"], ready["minimum"]) == ("integer", 0)
