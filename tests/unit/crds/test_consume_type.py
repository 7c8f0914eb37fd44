"""The ConsumerGroup CRD's ``spec.consumeType``, checked by embedded mode's validator as the
API server checks it (tests/k8s/test_apiserver_validation.py compares the two): an enum of the
topology's consume types, Any when absent (groups created before the field keep both kinds of
client), an unknown value refused naming the field, shown by ``kubectl get rcg -o wide``."""

from __future__ import annotations

from typing import Any

import pytest

from reconsume.apiserver.validation import checked
from reconsume.topology import ConsumeType, group_from_resource

from .schema import load_crds, root_schema, walk

CRDS = load_crds()
NODES = dict(walk(root_schema(CRDS["ConsumerGroup"])))


def group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "orders-consumer"},
        "spec": {"cluster": "orders", **spec},
    }


def test_the_enum_is_the_topologys_and_any_is_the_default() -> None:
    node = NODES[".spec.consumeType"]
    assert node["enum"] == [kind.value for kind in ConsumeType]
    assert node["default"] == ConsumeType.ANY.value == "Any"


@pytest.mark.parametrize("value", ["Any", "Pull", "Pop"])
def test_each_type_is_accepted_and_reaches_the_desired_group(value: str) -> None:
    stored, problems = checked(group(consumeType=value))
    assert problems == []
    assert group_from_resource(stored).consume_type is ConsumeType(value)


def test_an_absent_type_is_stored_as_any() -> None:
    stored, problems = checked(group())
    assert problems == []
    assert stored["spec"]["consumeType"] == "Any"


@pytest.mark.parametrize("value", ["Both", "pop", "POP", "", 1])
def test_an_unknown_type_is_refused_naming_the_field(value: object) -> None:
    _stored, problems = checked(group(consumeType=value))
    assert problems, value
    assert problems[0].path == "spec.consumeType"


def test_the_type_is_a_wide_column() -> None:
    (version,) = CRDS["ConsumerGroup"]["spec"]["versions"]
    (column,) = [c for c in version["additionalPrinterColumns"] if "consumeType" in c["jsonPath"]]
    assert column == {
        "name": "Consume Type",
        "type": "string",
        "priority": 1,
        "description": "Which clients may consume the group (spec.consumeType).",
        "jsonPath": ".spec.consumeType",
    }
