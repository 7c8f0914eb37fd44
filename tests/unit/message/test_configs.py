"""Topic and subscription-group configs in RocketMQ's JSON shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import (
    PERM_INHERIT,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    SubscriptionGroupConfig,
    TopicConfig,
    is_readable,
    is_writable,
    parse_consume_type,
    perm_to_string,
)

TOPIC_FIELDS = {
    "topicName",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "topicFilterType",
    "topicSysFlag",
    "order",
    "attributes",
}
GROUP_FIELDS = {
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "consumeMessageOrderly",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
    "groupSysFlag",
    "consumeTimeoutMinute",
    "attributes",
}

names = st.from_regex(r"[%|a-zA-Z0-9_-]{1,60}", fullmatch=True)
ints = st.integers(-(2**31), 2**31 - 1)
attrs = st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4)
topic_configs = st.builds(
    TopicConfig,
    topic_name=names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 7),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    topic_sys_flag=ints,
    order=st.booleans(),
    attributes=attrs,
)
json_values = st.recursive(
    st.none() | st.booleans() | ints | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
group_configs = st.builds(
    SubscriptionGroupConfig,
    group_name=names,
    consume_enable=st.booleans(),
    consume_from_min_enable=st.booleans(),
    consume_broadcast_enable=st.booleans(),
    consume_message_orderly=st.booleans(),
    retry_queue_nums=ints,
    retry_max_times=ints,
    group_retry_policy=st.none() | st.dictionaries(st.text(max_size=10), json_values, max_size=3),
    broker_id=ints,
    which_broker_when_consume_slowly=ints,
    notify_consumer_ids_changed_enable=st.booleans(),
    group_sys_flag=ints,
    consume_timeout_minute=ints,
    attributes=attrs,
)


def test_topic_to_dict_uses_rocketmq_names() -> None:
    config = TopicConfig("TopicTest", read_queue_nums=8, write_queue_nums=4, perm=PERM_READ)
    data = config.to_dict()
    assert set(data) == TOPIC_FIELDS
    assert data == {
        "topicName": "TopicTest",
        "readQueueNums": 8,
        "writeQueueNums": 4,
        "perm": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        "attributes": {},
    }
    assert config.queue_nums == 8


def test_topic_defaults_from_minimal_dict() -> None:
    assert TopicConfig.from_dict({"topicName": "t"}) == TopicConfig("t")
    assert TopicConfig("t").perm == PERM_READ_WRITE == 6


def test_group_to_dict_uses_rocketmq_names() -> None:
    data = SubscriptionGroupConfig("g").to_dict()
    assert set(data) == GROUP_FIELDS  # no groupRetryPolicy when unset
    assert data["retryMaxTimes"] == 16
    assert data["retryQueueNums"] == 1
    policy = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}
    data = SubscriptionGroupConfig("g", group_retry_policy=policy).to_dict()
    assert set(data) == GROUP_FIELDS | {"groupRetryPolicy"}
    assert data["groupRetryPolicy"] == policy


def test_group_defaults_from_minimal_dict() -> None:
    assert SubscriptionGroupConfig.from_dict({"groupName": "g"}) == SubscriptionGroupConfig("g")


@given(topic_configs)
def test_topic_round_trip(config: TopicConfig) -> None:
    assert TopicConfig.from_dict(config.to_dict()) == config
    assert TopicConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@given(group_configs)
def test_group_round_trip(config: SubscriptionGroupConfig) -> None:
    assert SubscriptionGroupConfig.from_dict(config.to_dict()) == config
    via_json = json.loads(json.dumps(config.to_dict()))
    assert SubscriptionGroupConfig.from_dict(via_json) == config


def test_strings_for_numbers_and_booleans_are_accepted() -> None:
    config = TopicConfig.from_dict(
        {"topicName": "t", "readQueueNums": "4", "perm": "2", "order": "TRUE"}
    )
    assert (config.read_queue_nums, config.perm, config.order) == (4, 2, True)
    group = SubscriptionGroupConfig.from_dict({"groupName": "g", "consumeEnable": "false"})
    assert group.consume_enable is False


def test_attributes_are_stringified() -> None:
    config = TopicConfig.from_dict({"topicName": "t", "attributes": {"k": 1}})
    assert config.attributes == {"k": "1"}
    assert TopicConfig.from_dict({"topicName": "t", "attributes": None}).attributes == {}


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"topicName": 5},
        {"topicName": None},
        {"topicName": "t", "readQueueNums": "many"},
        {"topicName": "t", "readQueueNums": 1.5},
        {"topicName": "t", "readQueueNums": True},
        {"topicName": "t", "readQueueNums": [1]},
        {"topicName": "t", "readQueueNums": 1025},
        {"topicName": "t", "writeQueueNums": -1},
        {"topicName": "t", "perm": 8},
        {"topicName": "t", "perm": -1},
        {"topicName": "t", "order": "yes"},
        {"topicName": "t", "order": 1},
        {"topicName": "t", "topicSysFlag": None},
        {"topicName": "t", "attributes": ["a"]},
        {"topicName": "t", "attributes": "a=b"},
    ],
)
def test_topic_bad_types(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        TopicConfig.from_dict(data)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"groupName": 1},
        {"groupName": "g", "retryMaxTimes": "x"},
        {"groupName": "g", "retryMaxTimes": 2.0},
        {"groupName": "g", "retryQueueNums": False},
        {"groupName": "g", "consumeEnable": "no"},
        {"groupName": "g", "consumeEnable": 0},
        {"groupName": "g", "consumeMessageOrderly": None},
        {"groupName": "g", "groupRetryPolicy": "EXPONENTIAL"},
        {"groupName": "g", "groupRetryPolicy": [1]},
        {"groupName": "g", "attributes": [("k", "v")]},
    ],
)
def test_group_bad_types(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        SubscriptionGroupConfig.from_dict(data)


def test_topic_constructor_validates() -> None:
    with pytest.raises(InvalidArgumentError, match="read_queue_nums"):
        TopicConfig("t", read_queue_nums=2000)
    with pytest.raises(InvalidArgumentError, match="perm"):
        TopicConfig("t", perm=9)


def test_with_changes() -> None:
    config = TopicConfig("t")
    assert config.with_changes(perm=PERM_READ).perm == PERM_READ
    assert config.perm == PERM_READ_WRITE
    with pytest.raises(InvalidArgumentError):
        config.with_changes(write_queue_nums=5000)
    group = SubscriptionGroupConfig("g").with_changes(retry_max_times=3)
    assert group.retry_max_times == 3


@pytest.mark.parametrize(
    ("perm", "text", "readable", "writable"),
    [
        (0, "---", False, False),
        (PERM_INHERIT, "--X", False, False),
        (PERM_WRITE, "-W-", False, True),
        (PERM_READ, "R--", True, False),
        (PERM_READ_WRITE, "RW-", True, True),
        (7, "RWX", True, True),
    ],
)
def test_perm(perm: int, text: str, readable: bool, writable: bool) -> None:
    assert perm_to_string(perm) == text
    assert is_readable(perm) is readable
    assert is_writable(perm) is writable


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [({}, "ANY"), ({"consume.type": "POP"}, "POP"), ({"consume.type": "pull"}, "PULL"),
     ({"+consume.type": "POP"}, "POP"), ({"consume.type": "ANY", "other": "x"}, "ANY"),
     ({"consume.type": "BOTH"}, "ANY")],
)  # fmt: skip
def test_a_groups_consume_type_is_its_attribute(attributes: dict[str, str], kind: str) -> None:
    """Absent (and, never stored by a broker, unknown) is ANY; mqadmin 5's ``+key`` is read."""
    config = SubscriptionGroupConfig.from_dict({"groupName": "g", "attributes": attributes})
    assert config.consume_type == kind
    assert SubscriptionGroupConfig.from_dict(config.to_dict()) == config


def test_an_unknown_consume_type_is_refused_naming_the_attribute() -> None:
    assert parse_consume_type(None) == "ANY"
    assert parse_consume_type(" Pop ") == "POP"
    with pytest.raises(InvalidArgumentError, match=r"consume\.type 'BOTH' is not one of ANY"):
        parse_consume_type("BOTH")
