"""observe -> plan -> apply against an in-memory cluster: apply converges, a second plan is
empty, failures are reported without stopping the other brokers, statuses fit the CRDs."""

from __future__ import annotations

import asyncio

from reconsume.message.configs import PERM_READ_WRITE, TopicConfig
from reconsume.topology import (
    ActionKind,
    CustomizedPolicy,
    DeletionPolicy,
    Desired,
    DesiredGroup,
    DesiredTopic,
    Kind,
    Observed,
    Removal,
    apply,
    group_status,
    observe,
    plan,
    topic_status,
)
from reconsume.topology.fake_admin import FakeAdmin, FakeBroker

from ..crds.schema import load_crds, root_schema, validate

GROUP = "orders-consumer"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"
CRDS = load_crds()


def cluster() -> FakeAdmin:
    return FakeAdmin([FakeBroker("broker-a", "127.0.0.1:1"), FakeBroker("broker-b", "127.0.0.1:2")])


async def converge(admin: FakeAdmin, desired: Desired) -> tuple[Observed, int]:
    """One reconcile; returns the observation after it and the number of actions applied."""
    todo = plan(desired, await observe(admin, desired, cluster="test"))
    result = await apply(todo, admin)
    assert result.ok, result.describe()
    return await observe(admin, desired, cluster="test"), len(result.done)


def test_apply_converges_and_a_second_plan_is_empty() -> None:
    admin = cluster()
    group = DesiredGroup(GROUP, retry_queue_nums=2, retry_policy=CustomizedPolicy((1000, 5000)))
    desired = Desired(groups=(group,), topics=(DesiredTopic("orders", queues=4),))

    async def scenario() -> None:
        observed, applied = await converge(admin, desired)
        assert applied == 8  # group + retry + DLQ on 2 brokers, topic on 2
        assert plan(desired, observed).empty
        for broker in admin.brokers_:
            assert broker.groups[GROUP].group_retry_policy == {
                "type": "CUSTOMIZED",
                "customizedRetryPolicy": {"next": [1000, 5000]},
            }
            assert broker.topics[RETRY] == TopicConfig(RETRY, 2, 2, PERM_READ_WRITE)
            assert broker.topics[DLQ] == TopicConfig(DLQ, 1, 1, PERM_READ_WRITE)
            assert broker.topics["orders"] == TopicConfig("orders", 4, 4)

    asyncio.run(scenario())


def test_lowering_retry_queues_converges_while_removed_queues_drain() -> None:
    admin = cluster()

    async def scenario() -> None:
        await converge(admin, Desired(groups=(DesiredGroup(GROUP, retry_queue_nums=4),)))
        lowered = Desired(groups=(DesiredGroup(GROUP, retry_queue_nums=1),))
        observed, applied = await converge(admin, lowered)
        assert applied == 4  # group and retry topic on each broker
        assert plan(lowered, observed).empty
        topic = admin.brokers_[0].topics[RETRY]
        assert (topic.read_queue_nums, topic.write_queue_nums) == (4, 1)

    asyncio.run(scenario())


def test_a_failed_action_does_not_stop_the_others() -> None:
    admin = cluster()
    admin.fail.add(("create_group", "127.0.0.1:1"))
    desired = Desired(groups=(DesiredGroup(GROUP),))

    async def scenario() -> None:
        result = await apply(plan(desired, await observe(admin, desired)), admin)
        assert not result.ok
        (failure,) = result.failed
        assert failure.action.kind is ActionKind.CREATE_GROUP
        assert failure.action.broker == "broker-a"
        assert "connect to 127.0.0.1:1 failed" in failure.error
        assert len(result.done) == 5
        admin.fail.clear()
        observed, applied = await converge(admin, desired)
        assert applied == 1
        assert plan(desired, observed).empty

    asyncio.run(scenario())


def test_a_broker_that_does_not_answer_is_observed_with_its_error() -> None:
    admin = cluster()
    admin.brokers_[1].down = True
    desired = Desired(groups=(DesiredGroup(GROUP),))

    async def scenario() -> None:
        observed = await observe(admin, desired)
        assert [b.reachable for b in observed.brokers] == [True, False]
        assert observed.brokers[1].error == "connect to 127.0.0.1:2 failed"
        todo = plan(desired, observed)
        assert {a.broker for a in todo.actions} == {"broker-a"}
        status = group_status(desired.groups[0], observed, todo)
        assert (status.ready, status.reason) == (False, "BrokerUnreachable")

    asyncio.run(scenario())


def test_removal_deletes_and_drops_routes_once_the_dead_letters_are_gone() -> None:
    admin = cluster()
    group = DesiredGroup(GROUP, deletion_policy=DeletionPolicy.DELETE)

    async def scenario() -> None:
        await converge(admin, Desired(groups=(group,)))
        admin.brokers_[1].stored[DLQ] = 2
        removal = group.removal()
        assert removal is not None
        desired = Desired(removals=(removal,))
        refused = plan(desired, await observe(admin, desired, cluster="test"))
        assert refused.empty
        assert refused.refusals[0].reason.startswith(f"{DLQ} holds dead letters (2 on broker-b)")
        status = group_status(group, await observe(admin, Desired(groups=(group,))), refused)
        assert (status.ready, status.reason) == (False, "DeletionRefused")
        assert "force-delete" in status.message
        forced = Desired(removals=(Removal(Kind.GROUP, GROUP, force=True),))
        observed, applied = await converge(admin, forced)
        assert applied == 8
        assert admin.routes_deleted == [(RETRY, "test"), (DLQ, "test")]
        assert all(not b.groups and not b.topics for b in admin.brokers_)
        assert plan(forced, observed).empty

    asyncio.run(scenario())


def test_a_route_is_kept_when_a_broker_kept_the_topic() -> None:
    admin = cluster()
    admin.fail.add(("delete_topic", "127.0.0.1:2"))
    topic = DesiredTopic("orders")

    async def scenario() -> None:
        await converge(admin, Desired(topics=(topic,)))
        desired = Desired(removals=(Removal(Kind.TOPIC, "orders"),))
        result = await apply(plan(desired, await observe(admin, desired)), admin)
        assert [f.action.kind for f in result.failed] == [
            ActionKind.DELETE_TOPIC,
            ActionKind.DELETE_ROUTE,
        ]
        assert admin.routes_deleted == []

    asyncio.run(scenario())


def test_statuses_report_depths_and_fit_the_crds() -> None:
    admin = cluster()
    group = DesiredGroup(GROUP)
    topic = DesiredTopic("orders", queues=2)
    desired = Desired(groups=(group,), topics=(topic,))

    async def scenario() -> None:
        before = await observe(admin, desired)
        pending = group_status(group, before, plan(desired, before))
        assert (pending.ready, pending.reason) == (False, "Pending")
        assert "CreateGroup orders-consumer on broker-a (absent)" in pending.message
        await converge(admin, desired)
        admin.brokers_[0].stored[DLQ] = 3
        admin.brokers_[1].unconsumed[GROUP] = 4
        admin.brokers_[1].stored["orders"] = 10
        observed = await observe(admin, desired)
        todo = plan(desired, observed)
        status = group_status(group, observed, todo)
        assert (status.ready, status.reason) == (True, "Reconciled")
        document = status.to_status()
        assert document == {
            "groupName": GROUP,
            "retryTopic": RETRY,
            "deadLetterTopic": DLQ,
            "retryDepth": 4,
            "deadLetterDepth": 3,
            "brokers": [
                {
                    "name": "broker-a",
                    "address": "127.0.0.1:1",
                    "ready": True,
                    "retryDepth": 0,
                    "deadLetterDepth": 3,
                },
                {
                    "name": "broker-b",
                    "address": "127.0.0.1:2",
                    "ready": True,
                    "retryDepth": 4,
                    "deadLetterDepth": 0,
                },
            ],
        }
        schema = root_schema(CRDS["ConsumerGroup"])["properties"]["status"]
        assert validate(schema, document) == []
        topic_document = topic_status(topic, observed, todo).to_status()
        assert topic_document["depth"] == 10
        assert topic_document["brokers"][1] == {
            "name": "broker-b",
            "address": "127.0.0.1:2",
            "ready": True,
            "readQueueNums": 2,
            "writeQueueNums": 2,
            "depth": 10,
        }
        assert validate(root_schema(CRDS["Topic"])["properties"]["status"], topic_document) == []

    asyncio.run(scenario())


def test_no_brokers_is_not_ready() -> None:
    admin = FakeAdmin([])
    group = DesiredGroup(GROUP)

    async def scenario() -> None:
        observed = await observe(admin, Desired(groups=(group,)), cluster="orders")
        status = group_status(group, observed, plan(Desired(groups=(group,)), observed))
        assert (status.ready, status.reason) == (False, "NoBrokers")
        assert status.message == "no broker is registered with cluster orders"

    asyncio.run(scenario())
