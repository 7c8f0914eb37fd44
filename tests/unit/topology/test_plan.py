"""plan(desired, observed): a pure diff, per broker, of groups, retry/DLQ topics, business topics
and removals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import (
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    SubscriptionGroupConfig,
    TopicConfig,
)
from reconsume.topology import (
    ActionKind,
    BrokerState,
    CustomizedPolicy,
    DeletionPolicy,
    Desired,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    Kind,
    MessageModel,
    Observed,
    Permission,
    Plan,
    Removal,
    RetryPolicy,
    plan,
)

GROUP = "orders-consumer"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"


def broker(
    name: str,
    groups: Sequence[SubscriptionGroupConfig] = (),
    topics: Sequence[TopicConfig] = (),
    depths: dict[str, int] | None = None,
    retry_depths: dict[str, int] | None = None,
    error: str | None = None,
) -> BrokerState:
    return BrokerState(
        name,
        f"10.0.0.{ord(name[-1]) - 96}:10911",
        {g.group_name: g for g in groups},
        {t.topic_name: t for t in topics},
        depths or {},
        retry_depths or {},
        error,
    )


def configured(group: DesiredGroup, name: str = "broker-a", **extra: Any) -> BrokerState:
    """A broker that has exactly what ``group`` asks for."""
    topics = [TopicConfig(RETRY, group.retry_queue_nums, group.retry_queue_nums, PERM_READ_WRITE)]
    topics.append(TopicConfig(DLQ, 1, 1, group.dead_letter_perm))
    return broker(name, [group.config()], topics, **extra)


def kinds(result: Plan) -> list[tuple[ActionKind, str, str | None]]:
    return [(a.kind, a.name, a.broker) for a in result.actions]


def test_empty_brokers_get_group_retry_and_dead_letter_topics() -> None:
    result = plan(
        Desired(groups=(DesiredGroup(GROUP),)), Observed((broker("broker-a"), broker("broker-b")))
    )
    assert kinds(result) == [
        (ActionKind.CREATE_GROUP, GROUP, "broker-a"),
        (ActionKind.CREATE_TOPIC, RETRY, "broker-a"),
        (ActionKind.CREATE_TOPIC, DLQ, "broker-a"),
        (ActionKind.CREATE_GROUP, GROUP, "broker-b"),
        (ActionKind.CREATE_TOPIC, RETRY, "broker-b"),
        (ActionKind.CREATE_TOPIC, DLQ, "broker-b"),
    ]
    create_group, create_retry, create_dlq = result.actions[:3]
    assert create_group.group is not None
    assert (create_group.group.retry_queue_nums, create_group.group.retry_max_times) == (1, 16)
    assert create_group.group.group_retry_policy is None
    assert create_group.address == "10.0.0.1:10911"
    assert create_retry.topic == TopicConfig(RETRY, 1, 1, PERM_READ_WRITE)
    assert create_dlq.topic == TopicConfig(DLQ, 1, 1, PERM_READ_WRITE)
    assert all(a.owner == (Kind.GROUP, GROUP) for a in result.actions)


def test_matching_brokers_need_nothing() -> None:
    group = DesiredGroup(GROUP, retry_queue_nums=3, retry_max_times=5)
    result = plan(
        Desired(groups=(group,)), Observed((configured(group), configured(group, "broker-b")))
    )
    assert result.empty
    assert not result.warnings
    assert not result.refusals


def test_changed_max_times_updates_only_the_group_config() -> None:
    before = DesiredGroup(GROUP)
    after = DesiredGroup(GROUP, retry_max_times=3)
    result = plan(
        Desired(groups=(after,)), Observed((configured(before), configured(before, "broker-b")))
    )
    assert kinds(result) == [
        (ActionKind.UPDATE_GROUP, GROUP, "broker-a"),
        (ActionKind.UPDATE_GROUP, GROUP, "broker-b"),
    ]
    assert result.actions[0].reason == "retryMaxTimes 16 -> 3"
    assert result.actions[0].group is not None
    assert result.actions[0].group.retry_max_times == 3


def test_update_keeps_fields_topology_does_not_manage() -> None:
    current = SubscriptionGroupConfig(
        GROUP, consume_timeout_minute=42, which_broker_when_consume_slowly=3
    )
    result = plan(
        Desired(groups=(DesiredGroup(GROUP, orderly=True),)),
        Observed((broker("broker-a", [current]),)),
    )
    update = result.actions[0]
    assert update.kind is ActionKind.UPDATE_GROUP
    assert update.group is not None
    assert update.group.consume_timeout_minute == 42
    assert update.group.which_broker_when_consume_slowly == 3
    assert update.group.consume_message_orderly is True
    assert "consumeMessageOrderly False -> True" in update.reason


def test_missing_retry_topic_is_created_on_that_broker_only() -> None:
    group = DesiredGroup(GROUP)
    damaged = configured(group, "broker-b")
    damaged = BrokerState(damaged.name, damaged.address, damaged.groups, {DLQ: damaged.topics[DLQ]})
    result = plan(Desired(groups=(group,)), Observed((configured(group), damaged)))
    assert kinds(result) == [(ActionKind.CREATE_TOPIC, RETRY, "broker-b")]


def test_raised_retry_queue_nums_updates_group_and_retry_topic() -> None:
    result = plan(
        Desired(groups=(DesiredGroup(GROUP, retry_queue_nums=4),)),
        Observed((configured(DesiredGroup(GROUP)),)),
    )
    assert kinds(result) == [
        (ActionKind.UPDATE_GROUP, GROUP, "broker-a"),
        (ActionKind.UPDATE_TOPIC, RETRY, "broker-a"),
    ]
    assert result.actions[1].topic == TopicConfig(RETRY, 4, 4, PERM_READ_WRITE)
    assert result.actions[1].reason == "writeQueueNums 1 -> 4; readQueueNums 1 -> 4"


def test_lowered_retry_queue_nums_never_lowers_read_queues() -> None:
    result = plan(
        Desired(groups=(DesiredGroup(GROUP, retry_queue_nums=1),)),
        Observed((configured(DesiredGroup(GROUP, retry_queue_nums=4)),)),
    )
    topic = result.actions[1].topic
    assert topic is not None
    assert (topic.read_queue_nums, topic.write_queue_nums) == (4, 1)


def test_a_draining_retry_topic_is_as_desired() -> None:
    group = DesiredGroup(GROUP, retry_queue_nums=1)
    draining = configured(group)
    topics = dict(draining.topics) | {RETRY: TopicConfig(RETRY, 4, 1, PERM_READ_WRITE)}
    result = plan(
        Desired(groups=(group,)),
        Observed((BrokerState("broker-a", "a:1", draining.groups, topics),)),
    )
    assert result.empty


def test_retry_topic_permission_is_restored() -> None:
    group = DesiredGroup(GROUP)
    state = configured(group)
    topics = dict(state.topics) | {RETRY: TopicConfig(RETRY, 1, 1, PERM_READ)}
    result = plan(
        Desired(groups=(group,)), Observed((BrokerState("broker-a", "a:1", state.groups, topics),))
    )
    assert kinds(result) == [(ActionKind.UPDATE_TOPIC, RETRY, "broker-a")]
    assert result.actions[0].reason == f"perm {PERM_READ} -> {PERM_READ_WRITE}"


def test_zero_retry_queues_creates_no_retry_topic_and_keeps_an_existing_one() -> None:
    group = DesiredGroup(GROUP, retry_queue_nums=0)
    result = plan(Desired(groups=(group,)), Observed((broker("broker-a"),)))
    assert [a.name for a in result.actions] == [GROUP, DLQ]
    state = configured(DesiredGroup(GROUP, retry_queue_nums=2))
    result = plan(Desired(groups=(group,)), Observed((state,)))
    assert kinds(result) == [(ActionKind.UPDATE_GROUP, GROUP, "broker-a")]


def test_broadcasting_group_has_no_retry_or_dead_letter_topic() -> None:
    group = DesiredGroup(GROUP, message_model=MessageModel.BROADCASTING)
    result = plan(Desired(groups=(group,)), Observed((broker("broker-a"),)))
    assert kinds(result) == [(ActionKind.CREATE_GROUP, GROUP, "broker-a")]
    assert result.actions[0].group is not None
    assert result.actions[0].group.consume_broadcast_enable is True
    clustering = plan(Desired(groups=(DesiredGroup(GROUP),)), Observed((broker("broker-a"),)))
    assert clustering.actions[0].group is not None
    assert clustering.actions[0].group.consume_broadcast_enable is False


def test_unreadable_dead_letter_topic_is_write_only() -> None:
    group = DesiredGroup(GROUP, dead_letter_readable=False)
    result = plan(Desired(groups=(group,)), Observed((configured(DesiredGroup(GROUP)),)))
    assert kinds(result) == [(ActionKind.UPDATE_TOPIC, DLQ, "broker-a")]
    assert result.actions[0].topic == TopicConfig(DLQ, 1, 1, PERM_WRITE)


def test_dead_letter_topic_with_extra_queues_keeps_them_readable() -> None:
    group = DesiredGroup(GROUP)
    state = configured(group)
    topics = dict(state.topics) | {DLQ: TopicConfig(DLQ, 3, 3, PERM_READ_WRITE)}
    result = plan(
        Desired(groups=(group,)), Observed((BrokerState("broker-a", "a:1", state.groups, topics),))
    )
    assert result.actions[0].topic == TopicConfig(DLQ, 3, 1, PERM_READ_WRITE)


@pytest.mark.parametrize(
    ("policy", "document"),
    [
        (
            CustomizedPolicy((1_000, 60_000)),
            {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 60000]}},
        ),
        (
            ExponentialPolicy(5_000, 7_200_000, 2),
            {
                "type": "EXPONENTIAL",
                "exponentialRetryPolicy": {"initial": 5000, "max": 7200000, "multiplier": 2},
            },
        ),
    ],
)
def test_retry_policy_is_written_as_group_retry_policy(
    policy: RetryPolicy, document: dict[str, object]
) -> None:
    group = DesiredGroup(GROUP, retry_policy=policy)
    result = plan(Desired(groups=(group,)), Observed((configured(DesiredGroup(GROUP)),)))
    assert kinds(result) == [(ActionKind.UPDATE_GROUP, GROUP, "broker-a")]
    assert result.actions[0].group is not None
    assert result.actions[0].group.group_retry_policy == document


@pytest.mark.parametrize(
    "document",
    [
        None,
        {"type": "CUSTOMIZED"},
        {"type": "EXPONENTIAL"},
        {"customizedRetryPolicy": {}},
    ],
)
def test_policies_meaning_delay_levels_match_delay_levels(
    document: dict[str, object] | None,
) -> None:
    current = DesiredGroup(GROUP).config().with_changes(group_retry_policy=document)
    state = configured(DesiredGroup(GROUP))
    observed = Observed((BrokerState("broker-a", "a:1", {GROUP: current}, state.topics),))
    assert plan(Desired(groups=(DesiredGroup(GROUP),)), observed).empty


def test_exponential_policy_with_engine_defaults_matches() -> None:
    document = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}
    current = DesiredGroup(GROUP).config().with_changes(group_retry_policy=document)
    state = configured(DesiredGroup(GROUP))
    observed = Observed((BrokerState("broker-a", "a:1", {GROUP: current}, state.topics),))
    group = DesiredGroup(GROUP, retry_policy=ExponentialPolicy(1_000, 7_200_000, 2))
    assert plan(Desired(groups=(group,)), observed).empty


def test_an_unreadable_policy_is_replaced() -> None:
    current = DesiredGroup(GROUP).config().with_changes(group_retry_policy={"type": "LINEAR"})
    state = configured(DesiredGroup(GROUP))
    observed = Observed((BrokerState("broker-a", "a:1", {GROUP: current}, state.topics),))
    result = plan(Desired(groups=(DesiredGroup(GROUP),)), observed)
    assert kinds(result) == [(ActionKind.UPDATE_GROUP, GROUP, "broker-a")]
    assert "groupRetryPolicy" in result.actions[0].reason


def test_unreachable_broker_is_skipped_with_a_warning() -> None:
    result = plan(
        Desired(groups=(DesiredGroup(GROUP),)),
        Observed((broker("broker-a"), broker("broker-b", error="connection refused"))),
    )
    assert {a.broker for a in result.actions} == {"broker-a"}
    assert result.warnings == (
        "broker broker-b (10.0.0.2:10911) did not answer: connection refused",
    )


def test_no_broker_is_a_warning() -> None:
    result = plan(Desired(groups=(DesiredGroup(GROUP),)), Observed((), cluster="orders"))
    assert result.empty
    assert result.warnings == ("no broker is registered with cluster orders",)


def test_a_subscription_to_a_missing_topic_is_a_warning() -> None:
    group = DesiredGroup(GROUP, subscriptions=("orders", "refunds"))
    state = configured(group)
    topics = dict(state.topics) | {"orders": TopicConfig("orders")}
    result = plan(
        Desired(groups=(group,)), Observed((BrokerState("broker-a", "a:1", state.groups, topics),))
    )
    assert result.empty
    assert result.warnings == (f"group {GROUP} subscribes to refunds, which no broker has",)


# ------------------------------------------------------------------ business topics
def test_topic_created_and_updated() -> None:
    topic = DesiredTopic("orders", queues=4, permission=Permission.READ_ONLY, order=True)
    result = plan(
        Desired(topics=(topic,)),
        Observed((broker("broker-a"), broker("broker-b", topics=[TopicConfig("orders", 8, 8)]))),
    )
    assert kinds(result) == [
        (ActionKind.CREATE_TOPIC, "orders", "broker-a"),
        (ActionKind.UPDATE_TOPIC, "orders", "broker-b"),
    ]
    assert result.actions[0].topic == TopicConfig("orders", 4, 4, PERM_READ, order=True)
    assert result.actions[1].topic == TopicConfig("orders", 4, 4, PERM_READ, order=True)
    assert result.actions[1].reason == (
        f"readQueueNums 8 -> 4; writeQueueNums 8 -> 4; perm {PERM_READ_WRITE} -> {PERM_READ}; "
        "order False -> True"
    )


def test_matching_topic_needs_nothing() -> None:
    topic = DesiredTopic("orders")
    assert plan(
        Desired(topics=(topic,)), Observed((broker("broker-a", topics=[topic.config()]),))
    ).empty


# ------------------------------------------------------------------ removals
def removal_state(dlq_depth: int | None, name: str = "broker-a") -> BrokerState:
    state = configured(DesiredGroup(GROUP), name)
    depths = {} if dlq_depth is None else {DLQ: dlq_depth}
    return BrokerState(state.name, state.address, state.groups, state.topics, depths)


def test_group_removal_deletes_group_and_topics_everywhere() -> None:
    result = plan(
        Desired(removals=(Removal(Kind.GROUP, GROUP),)),
        Observed((removal_state(0), removal_state(0, "broker-b")), cluster="orders"),
    )
    assert kinds(result) == [
        (ActionKind.DELETE_GROUP, GROUP, "broker-a"),
        (ActionKind.DELETE_TOPIC, RETRY, "broker-a"),
        (ActionKind.DELETE_TOPIC, DLQ, "broker-a"),
        (ActionKind.DELETE_GROUP, GROUP, "broker-b"),
        (ActionKind.DELETE_TOPIC, RETRY, "broker-b"),
        (ActionKind.DELETE_TOPIC, DLQ, "broker-b"),
        (ActionKind.DELETE_ROUTE, RETRY, None),
        (ActionKind.DELETE_ROUTE, DLQ, None),
    ]
    assert result.cluster == "orders"
    assert not result.refusals


def test_group_removal_is_refused_while_dead_letters_are_kept() -> None:
    result = plan(
        Desired(removals=(Removal(Kind.GROUP, GROUP),)),
        Observed((removal_state(0), removal_state(3, "broker-b"))),
    )
    assert result.empty
    (refusal,) = result.refusals
    assert refusal.owner == (Kind.GROUP, GROUP)
    assert refusal.reason.startswith(f"{DLQ} holds dead letters (3 on broker-b)")
    assert "reconsume.io/force-delete" in refusal.reason


def test_group_removal_is_refused_when_the_depth_is_unknown() -> None:
    result = plan(Desired(removals=(Removal(Kind.GROUP, GROUP),)), Observed((removal_state(None),)))
    assert result.empty
    assert "an unknown number on broker-a" in result.refusals[0].reason
    down = broker("broker-b", error="timeout")
    result = plan(
        Desired(removals=(Removal(Kind.GROUP, GROUP),)), Observed((removal_state(0), down))
    )
    assert result.empty
    assert "brokers broker-b did not answer" in result.refusals[0].reason


def test_forced_group_removal_deletes_what_it_reaches() -> None:
    down = broker("broker-b", error="timeout")
    result = plan(
        Desired(removals=(Removal(Kind.GROUP, GROUP, force=True),)),
        Observed((removal_state(5), down)),
    )
    assert not result.refusals
    assert [a.kind for a in result.actions if a.broker == "broker-a"] == [
        ActionKind.DELETE_GROUP,
        ActionKind.DELETE_TOPIC,
        ActionKind.DELETE_TOPIC,
    ]


def test_removal_of_what_is_gone_is_empty() -> None:
    result = plan(
        Desired(removals=(Removal(Kind.GROUP, GROUP), Removal(Kind.TOPIC, "orders"))),
        Observed((broker("broker-a"),)),
    )
    assert result.empty
    assert not result.refusals


def test_topic_removal_is_refused_while_it_holds_messages() -> None:
    state = broker("broker-a", topics=[TopicConfig("orders")], depths={"orders": 7})
    result = plan(Desired(removals=(Removal(Kind.TOPIC, "orders"),)), Observed((state,)))
    assert result.empty
    assert result.refusals[0].reason.startswith("orders holds messages (7 on broker-a)")
    forced = plan(
        Desired(removals=(Removal(Kind.TOPIC, "orders", force=True),)), Observed((state,))
    )
    assert kinds(forced) == [
        (ActionKind.DELETE_TOPIC, "orders", "broker-a"),
        (ActionKind.DELETE_ROUTE, "orders", None),
    ]


def test_deletion_policy_decides_whether_deleting_the_resource_removes() -> None:
    assert DesiredGroup(GROUP).removal() is None
    assert DesiredGroup(GROUP, deletion_policy=DeletionPolicy.DELETE).removal(
        force=True
    ) == Removal(Kind.GROUP, GROUP, True)
    assert DesiredTopic("orders").removal() is None
    assert DesiredTopic("orders", deletion_policy=DeletionPolicy.DELETE).removal() == Removal(
        Kind.TOPIC, "orders"
    )


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="more than once"):
        Desired(groups=(DesiredGroup(GROUP),), removals=(Removal(Kind.GROUP, GROUP),))
    with pytest.raises(InvalidArgumentError, match="more than once"):
        Desired(topics=(DesiredTopic("orders"), DesiredTopic("orders", queues=2)))


def test_describe_lists_actions_refusals_and_warnings() -> None:
    state = removal_state(2)
    result = plan(
        Desired(groups=(DesiredGroup("other"),), removals=(Removal(Kind.GROUP, GROUP),)),
        Observed((state, broker("broker-b", error="down"))),
    )
    lines = result.describe()
    assert "CreateGroup other on broker-a (absent)" in lines
    assert any(line.startswith(f"refused: group {GROUP}: ") for line in lines)
    assert "warning: broker broker-b (10.0.0.2:10911) did not answer: down" in lines
