"""The manifests in examples/ are valid against the CRDs (schema, with defaults applied), every
default in the CRDs is valid where it stands, and topology reads the examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconsume.topology import (
    ExponentialPolicy,
    MessageModel,
    group_from_resource,
    topic_from_resource,
)

from .schema import EXAMPLES_DIR, KINDS, defaulted, load_crds, root_schema, validate, walk

CRDS = load_crds()
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def test_an_example_for_every_kind() -> None:
    assert {load(path)["kind"] for path in EXAMPLES} == set(KINDS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_valid(path: Path) -> None:
    document = load(path)
    assert document["apiVersion"] == "reconsume.io/v1alpha1"
    schema = root_schema(CRDS[document["kind"]])
    assert validate(schema, defaulted(schema, document)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_are_valid_where_they_stand(kind: str) -> None:
    for path, node in walk(root_schema(CRDS[kind])):
        if "default" in node:
            value = defaulted(node, node["default"])
            assert validate(node, value, path) == [], path


def test_minimal_objects_get_the_documented_defaults() -> None:
    group = {"apiVersion": "reconsume.io/v1alpha1", "kind": "ConsumerGroup"}
    group |= {"metadata": {"name": "orders-consumer"}, "spec": {"cluster": "orders"}}
    spec = defaulted(root_schema(CRDS["ConsumerGroup"]), group)["spec"]
    assert spec["retry"] == {"queueNums": 1, "maxTimes": 16, "policy": {"type": "DelayLevels"}}
    assert spec["deadLetter"] == {"readable": True}
    assert (spec["deletionPolicy"], spec["messageModel"]) == ("Retain", "Clustering")
    cluster = {"apiVersion": "reconsume.io/v1alpha1", "kind": "BrokerCluster", "spec": {}}
    spec = defaulted(root_schema(CRDS["BrokerCluster"]), cluster)["spec"]
    assert (spec["brokers"], spec["nameServers"], spec["flush"]) == (2, 1, "Async")
    # No storage unless asked for (an external cluster has no volumes); given, its size is.
    assert "storage" not in spec
    assert "nameServerResources" not in spec
    cluster["spec"] = {"storage": {}}
    spec = defaulted(root_schema(CRDS["BrokerCluster"]), cluster)["spec"]
    assert spec["storage"] == {"size": "10Gi"}


def test_the_validator_catches_what_it_should() -> None:
    schema = root_schema(CRDS["ConsumerGroup"])
    bad = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "x"},
        "spec": {"cluster": "Orders", "retry": {"maxTimes": -2, "queueNums": 65}, "extra": 1},
    }
    problems = validate(schema, defaulted(schema, bad))
    assert len(problems) == 4, problems
    for field in ("spec.cluster", "spec.retry.maxTimes", "spec.retry.queueNums", "spec.extra"):
        assert any(field in p for p in problems), field


def test_topology_reads_the_examples() -> None:
    documents = {path.name: load(path) for path in EXAMPLES}
    group = group_from_resource(documents["consumergroup.yaml"])
    assert group.name == "GID_orders"
    assert (group.retry_queue_nums, group.retry_max_times) == (2, 5)
    assert group.retry_policy == ExponentialPolicy(10_000, 600_000, 2)
    assert group.message_model is MessageModel.CLUSTERING
    assert group.subscriptions == ("orders",)
    topic = topic_from_resource(documents["topic.yaml"])
    assert (topic.name, topic.queues) == ("orders", 8)
