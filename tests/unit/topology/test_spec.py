"""ConsumerGroup and Topic specs as desired state: the CRDs' defaults, and errors that name the
field."""

from __future__ import annotations

from typing import Any

import pytest

from reconsume.topology import (
    CustomizedPolicy,
    DelayLevelsPolicy,
    DeletionPolicy,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    MessageModel,
    Permission,
    SpecError,
    group_from_resource,
    group_from_spec,
    topic_from_resource,
    topic_from_spec,
)


def test_minimal_group_spec_has_the_crd_defaults() -> None:
    assert group_from_spec({"cluster": "orders"}, "orders-consumer") == DesiredGroup(
        "orders-consumer"
    )


def test_full_group_spec() -> None:
    spec = {
        "cluster": "orders",
        "groupName": "GID_orders",
        "messageModel": "Broadcasting",
        "orderly": True,
        "consumeEnable": False,
        "retry": {
            "queueNums": 0,
            "maxTimes": -1,
            "policy": {"type": "Customized", "delays": ["500ms", "10s", "1m", "2h", "1d"]},
        },
        "deadLetter": {"readable": False},
        "subscriptions": [{"topic": "orders", "expression": "*"}],
        "deletionPolicy": "Delete",
    }
    assert group_from_spec(spec, "ignored") == DesiredGroup(
        "GID_orders",
        retry_queue_nums=0,
        retry_max_times=-1,
        retry_policy=CustomizedPolicy((500, 10_000, 60_000, 7_200_000, 86_400_000)),
        message_model=MessageModel.BROADCASTING,
        orderly=True,
        consume_enable=False,
        dead_letter_readable=False,
        subscriptions=("orders",),
        deletion_policy=DeletionPolicy.DELETE,
    )


def test_policies_from_spec() -> None:
    def policy(body: dict[str, Any]) -> object:
        return group_from_spec({"retry": {"policy": body}}, "g").retry_policy

    assert policy({}) == DelayLevelsPolicy()
    assert policy({"type": "DelayLevels"}) == DelayLevelsPolicy()
    exponential = {"type": "Exponential", "initial": "5s", "max": "2h", "multiplier": 3}
    assert policy(exponential) == ExponentialPolicy(5_000, 7_200_000, 3)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"retry": {"maxTimes": -2}}, "spec.retry.maxTimes: -2 is outside -1..2147483647"),
        ({"retry": {"queueNums": 65}}, "spec.retry.queueNums: 65 is outside 0..64"),
        ({"retry": {"queueNums": "1"}}, "spec.retry.queueNums: expected an integer"),
        ({"retry": {"maxTimes": True}}, "spec.retry.maxTimes: expected an integer"),
        ({"retry": "fast"}, "spec.retry: expected an object"),
        (
            {"retry": {"policy": {"type": "Linear"}}},
            "spec.retry.policy.type: 'Linear' is not one of DelayLevels, Customized, Exponential",
        ),
        (
            {"retry": {"policy": {"type": "Customized"}}},
            "spec.retry.policy.delays: required when type is Customized",
        ),
        (
            {"retry": {"policy": {"type": "Customized", "delays": ["1s", "10x"]}}},
            "spec.retry.policy.delays[1]: '10x' is not a duration",
        ),
        (
            {"retry": {"policy": {"type": "Customized", "delays": "1s"}}},
            "spec.retry.policy.delays: expected a list",
        ),
        (
            {"retry": {"policy": {"delays": ["1s"]}}},
            "spec.retry.policy.delays: applies only to type Customized",
        ),
        (
            {"retry": {"policy": {"initial": "1s"}}},
            "spec.retry.policy.initial: applies only to type Exponential",
        ),
        (
            {"retry": {"policy": {"type": "Exponential", "max": "1m", "multiplier": 2}}},
            "spec.retry.policy.initial: required",
        ),
        (
            {"retry": {"policy": {"type": "Exponential", "initial": "1m", "max": "1m"}}},
            "spec.retry.policy.multiplier: required",
        ),
        (
            {
                "retry": {
                    "policy": {
                        "type": "Exponential",
                        "initial": "2d",
                        "max": "47h",
                        "multiplier": 2,
                    }
                }
            },
            "spec.retry.policy.max: must not be shorter than initial",
        ),
        (
            {
                "retry": {
                    "policy": {"type": "Exponential", "initial": "1s", "max": "1m", "multiplier": 0}
                }
            },
            "spec.retry.policy.multiplier: 0 is outside 1..100",
        ),
        (
            {"messageModel": "Queue"},
            "spec.messageModel: 'Queue' is not one of Clustering, Broadcasting",
        ),
        ({"orderly": "yes"}, "spec.orderly: expected true or false"),
        ({"deadLetter": {"readable": 1}}, "spec.deadLetter.readable: expected true or false"),
        (
            {"deletionPolicy": "Orphan"},
            "spec.deletionPolicy: 'Orphan' is not one of Retain, Delete",
        ),
        ({"subscriptions": [{"expression": "*"}]}, "spec.subscriptions[0].topic: required"),
        (
            {"groupName": "bad name"},
            "spec.groupName: consumer group name 'bad name' may contain only",
        ),
        ({"groupName": 7}, "spec.groupName: expected a string"),
    ],
)
def test_invalid_group_specs_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        group_from_spec(spec, "g")
    assert str(raised.value).startswith(message)


def test_group_name_falls_back_to_metadata_name() -> None:
    resource = {"metadata": {"name": "orders-consumer"}, "spec": {"cluster": "orders"}}
    assert group_from_resource(resource).name == "orders-consumer"
    with pytest.raises(SpecError, match=r"^metadata.name: consumer group name 'orders.consumer'"):
        group_from_resource({"metadata": {"name": "orders.consumer"}, "spec": {}})
    with pytest.raises(SpecError, match=r"^spec.groupName: required when metadata.name is absent"):
        group_from_spec({})


def test_topic_specs() -> None:
    assert topic_from_spec({"cluster": "orders"}, "orders") == DesiredTopic("orders")
    spec = {
        "topicName": "Orders_v2",
        "queues": 2,
        "perm": "WriteOnly",
        "order": True,
        "deletionPolicy": "Delete",
    }
    assert topic_from_spec(spec) == DesiredTopic(
        "Orders_v2", 2, Permission.WRITE_ONLY, True, DeletionPolicy.DELETE
    )
    assert topic_from_resource({"metadata": {"name": "orders"}, "spec": {}}).name == "orders"
    with pytest.raises(SpecError, match=r"^spec.queues: 0 is outside 1..1024"):
        topic_from_spec({"queues": 0}, "orders")
    with pytest.raises(
        SpecError, match=r"^spec.perm: 'RW' is not one of ReadWrite, ReadOnly, WriteOnly"
    ):
        topic_from_spec({"perm": "RW"}, "orders")
    with pytest.raises(SpecError, match=r"^spec.topicName: topic %RETRY%g is a retry"):
        topic_from_spec({"topicName": "%RETRY%g"})
