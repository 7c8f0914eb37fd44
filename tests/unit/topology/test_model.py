"""Desired groups and topics, and the retry-policy codec against the broker's retry engine."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import DelayLevels
from reconsume.engine.policies import retry_policy
from reconsume.errors import InvalidArgumentError, InvalidNameError
from reconsume.message.configs import PERM_READ_WRITE, PERM_WRITE, SubscriptionGroupConfig
from reconsume.topology import (
    CustomizedPolicy,
    DelayLevelsPolicy,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    Kind,
    MessageModel,
    Removal,
    RetryPolicy,
    UnknownPolicy,
    policy_from_json,
    policy_to_json,
)

LEVELS = DelayLevels.parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
MAX_DELAY_MS = 10**12

policies = st.one_of(
    st.just(DelayLevelsPolicy()),
    st.lists(st.integers(1, 10**9), min_size=1, max_size=20).map(
        lambda delays: CustomizedPolicy(tuple(delays))
    ),
    st.tuples(st.integers(1, 10**9), st.integers(0, 10**9), st.integers(1, 100)).map(
        lambda t: ExponentialPolicy(t[0], t[0] + t[1], t[2])
    ),
)


@given(policies)
def test_policy_json_round_trips(policy: RetryPolicy) -> None:
    assert policy_from_json(policy_to_json(policy)) == policy


@given(policies, st.integers(0, 40))
def test_the_engine_reads_the_policy_json_as_meant(
    policy: RetryPolicy, reconsume_times: int
) -> None:
    engine = retry_policy(policy_to_json(policy), LEVELS, MAX_DELAY_MS)
    decision = engine.decide(reconsume_times, 100, 0)
    if isinstance(policy, CustomizedPolicy):
        expected = policy.delays_ms[min(reconsume_times, len(policy.delays_ms) - 1)]
        assert decision.delay_ms == expected
    elif isinstance(policy, ExponentialPolicy):
        growth = policy.multiplier ** min(reconsume_times, 32)
        assert decision.delay_ms == min(policy.max_ms, policy.initial_ms * growth)
    else:
        assert decision.delay_level == LEVELS.clamp(3 + reconsume_times)


@pytest.mark.parametrize(
    "document",
    [
        {"type": "LINEAR"},
        {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": []}},
        {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [0]}},
        {"type": "CUSTOMIZED", "customizedRetryPolicy": "fast"},
        {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10, "max": 5}},
        {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"multiplier": True}},
    ],
)
def test_a_policy_the_engine_refuses_is_unknown(document: dict[str, object]) -> None:
    assert isinstance(policy_from_json(document), UnknownPolicy)
    with pytest.raises(InvalidArgumentError):
        retry_policy(document, LEVELS, MAX_DELAY_MS)


def test_group_config_sets_the_managed_fields() -> None:
    group = DesiredGroup(
        "GID_orders",
        retry_queue_nums=3,
        retry_max_times=-1,
        retry_policy=CustomizedPolicy((1_000,)),
        message_model=MessageModel.BROADCASTING,
        orderly=True,
        consume_enable=False,
    )
    config = group.config(SubscriptionGroupConfig("GID_orders", consume_timeout_minute=7))
    assert config.to_dict() | {"attributes": {}} == {
        "groupName": "GID_orders",
        "consumeEnable": False,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "consumeMessageOrderly": True,
        "retryQueueNums": 3,
        "retryMaxTimes": -1,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "groupSysFlag": 0,
        "consumeTimeoutMinute": 7,
        "attributes": {},
        "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000]}},
    }
    assert group.differences(config) == []
    assert (group.retry_topic, group.dead_letter_topic) == (None, None)


def test_group_topics_and_permissions() -> None:
    group = DesiredGroup("g")
    assert (group.retry_topic, group.dead_letter_topic) == ("%RETRY%g", "%DLQ%g")
    assert group.dead_letter_perm == PERM_READ_WRITE
    assert DesiredGroup("g", dead_letter_readable=False).dead_letter_perm == PERM_WRITE


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "bad name"}, "may contain only"),
        ({"name": "g" * 121}, "at most 120"),
        ({"name": "g", "retry_queue_nums": 65}, "retryQueueNums 65"),
        ({"name": "g", "retry_queue_nums": -1}, "retryQueueNums -1"),
        ({"name": "g", "retry_max_times": -2}, "retryMaxTimes -2"),
        ({"name": "g", "subscriptions": ("a b",)}, "may contain only"),
    ],
)
def test_invalid_groups(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        DesiredGroup(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["%RETRY%g", "%DLQ%g", "SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_x"]
)
def test_business_topics_are_not_retry_dead_letter_or_system_topics(name: str) -> None:
    with pytest.raises(InvalidNameError, match="not a business topic"):
        DesiredTopic(name)
    with pytest.raises(InvalidNameError):
        Removal(Kind.TOPIC, name)


def test_topic_bounds_and_policies() -> None:
    with pytest.raises(InvalidArgumentError, match="queues 0"):
        DesiredTopic("orders", queues=0)
    with pytest.raises(InvalidArgumentError):
        CustomizedPolicy(())
    with pytest.raises(InvalidArgumentError):
        ExponentialPolicy(10, 5, 2)
    with pytest.raises(InvalidArgumentError):
        ExponentialPolicy(1, 5, 0)
