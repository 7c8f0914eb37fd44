"""ConsumerGroup ``spec.consumeType`` as the group's ``consume.type`` attribute on every
broker: Any writes none (today's configs, unchanged), Pull and Pop write PULL and POP, other
attributes are kept, a change is planned and reported, and planning again is empty."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reconsume.message.configs import CONSUME_TYPE, SubscriptionGroupConfig
from reconsume.topology import ConsumeType, DesiredGroup, Kind, SpecError, group_from_spec
from reconsume.topology.fake_admin import FakeAdmin
from reconsume.topology.resources import Result, Target, reconcile

from .test_resources import Session, fake

TARGET = Target("127.0.0.1:9876", None)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [({}, ConsumeType.ANY), ({"consumeType": "Pull"}, ConsumeType.PULL),
     ({"consumeType": "Pop"}, ConsumeType.POP), ({"consumeType": "Any"}, ConsumeType.ANY)],
)  # fmt: skip
def test_the_spec_declares_the_consume_type_any_by_default(
    spec: dict[str, Any], expected: ConsumeType
) -> None:
    assert group_from_spec({"cluster": "orders", **spec}, "g").consume_type is expected


@pytest.mark.parametrize("value", ["Both", "pop", "POP", 1])
def test_an_unknown_consume_type_names_the_field(value: object) -> None:
    with pytest.raises(SpecError, match=r"^spec\.consumeType: .* is not one of Any, Pull, Pop"):
        group_from_spec({"cluster": "orders", "consumeType": value}, "g")


@pytest.mark.parametrize(
    ("kind", "attributes"),
    [(ConsumeType.ANY, {}), (ConsumeType.PULL, {CONSUME_TYPE: "PULL"}),
     (ConsumeType.POP, {CONSUME_TYPE: "POP"})],
)  # fmt: skip
def test_the_config_carries_the_type_as_an_attribute(
    kind: ConsumeType, attributes: dict[str, str]
) -> None:
    config = DesiredGroup("g", consume_type=kind).config()
    assert dict(config.attributes) == attributes
    assert config.consume_type == (kind.attribute or "ANY")
    assert config.to_dict()["attributes"] == attributes


def test_other_attributes_are_kept_and_either_spelling_is_replaced() -> None:
    current = SubscriptionGroupConfig(
        "g", consume_broadcast_enable=False, attributes={"+consume.type": "POP", "team": "a"}
    )
    pull = DesiredGroup("g", consume_type=ConsumeType.PULL)
    assert dict(pull.config(current).attributes) == {"team": "a", CONSUME_TYPE: "PULL"}
    anything = DesiredGroup("g")
    assert dict(anything.config(current).attributes) == {"team": "a"}
    assert anything.differences(current) == ["consume.type POP (as +consume.type) -> absent"]
    # The same type under the name mqadmin 5 writes is rewritten under the attribute's name.
    pop = DesiredGroup("g", consume_type=ConsumeType.POP)
    assert pop.differences(current) == ["consume.type POP (as +consume.type) -> POP"]
    assert pop.differences(pop.config(current)) == []


def test_any_leaves_a_config_without_the_attribute_unchanged() -> None:
    """Groups that existed before the field (and configs of other brokers) plan nothing."""
    current = SubscriptionGroupConfig("g", consume_broadcast_enable=False)
    assert DesiredGroup("g").differences(current) == []
    assert DesiredGroup("g", consume_type=ConsumeType.POP).differences(current) == [
        "consume.type absent -> POP"
    ]


def _run(admin: FakeAdmin, consume_type: str) -> Result:
    body = {
        "metadata": {"name": "orders-consumer", "annotations": {}},
        "spec": {"cluster": "orders", "groupName": "GID_orders", "consumeType": consume_type},
    }
    result: Result = asyncio.run(reconcile(Kind.GROUP, body, TARGET, Session(admin)))
    assert result.ready, result
    return result


def test_every_broker_gets_the_type_and_a_change_reaches_them_all() -> None:
    admin = fake()
    _run(admin, "Pop")
    assert [b.groups["GID_orders"].consume_type for b in admin.brokers_] == ["POP", "POP"]
    assert _run(admin, "Pop").changes == ()
    changed = _run(admin, "Pull")
    assert len(changed.changes) == 2
    assert all("consume.type POP -> PULL" in change for change in changed.changes), changed
    assert [b.groups["GID_orders"].consume_type for b in admin.brokers_] == ["PULL", "PULL"]
    _run(admin, "Any")
    assert [dict(b.groups["GID_orders"].attributes) for b in admin.brokers_] == [{}, {}]
