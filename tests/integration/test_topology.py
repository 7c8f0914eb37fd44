"""reconsume.topology against a real name server and two brokers: apply creates the group
config, retry and dead-letter topics and business topics on both brokers; planning again is
empty; a changed maxTimes reaches both brokers; a retry topic deleted out of band comes back;
a Delete removal waits for the dead-letter topic to be empty unless forced."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message.configs import PERM_READ_WRITE, PERM_WRITE, TopicConfig
from reconsume.message.model import Message
from reconsume.topology import (
    ActionKind,
    Applied,
    DeletionPolicy,
    Desired,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    Kind,
    Observed,
    Plan,
    Removal,
    apply,
    group_status,
    observe,
    plan,
)

from ..scratch import module_dir
from .cluster import Cluster, start_cluster
from .wire_client import eventually

CLUSTER = "test"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_dir(tmp_path_factory, "topology") as root:
        started = start_cluster(root)
        yield started
        started.kill()


async def reconcile(admin: AdminClient, desired: Desired) -> tuple[Plan, Applied, Observed]:
    """observe -> plan -> apply, then observe again."""
    todo = plan(desired, await observe(admin, desired, cluster=CLUSTER))
    result = await apply(todo, admin)
    assert result.ok, result.describe()
    return todo, result, await observe(admin, desired, cluster=CLUSTER)


def test_apply_creates_everything_then_plans_nothing_then_follows_max_times(
    brokers: Cluster,
) -> None:
    group = DesiredGroup(
        "topology-a",
        retry_queue_nums=2,
        retry_policy=ExponentialPolicy(1_000, 60_000, 2),
        dead_letter_readable=False,
    )
    topic = DesiredTopic("topology-orders", queues=4)
    desired = Desired(groups=(group,), topics=(topic,))

    async def scenario() -> None:
        async with AdminClient(brokers.name_servers) as admin:
            todo, result, observed = await reconcile(admin, desired)
            assert len(result.done) == 8
            assert {a.broker for a in todo.actions} == {"broker-a", "broker-b"}
            for process in brokers.brokers.values():
                groups = await admin.group_configs(process.address)
                topics = await admin.topic_configs(process.address)
                config = groups["topology-a"]
                assert (config.retry_queue_nums, config.retry_max_times) == (2, 16)
                assert config.group_retry_policy == {
                    "type": "EXPONENTIAL",
                    "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2},
                }
                assert config.consume_broadcast_enable is False
                assert topics["%RETRY%topology-a"] == TopicConfig(
                    "%RETRY%topology-a", 2, 2, PERM_READ_WRITE
                )
                assert topics["%DLQ%topology-a"] == TopicConfig("%DLQ%topology-a", 1, 1, PERM_WRITE)
                assert topics["topology-orders"] == TopicConfig("topology-orders", 4, 4)
            assert plan(desired, observed).empty
            status = group_status(group, observed, plan(desired, observed))
            assert (status.ready, status.reason) == (True, "Reconciled")

            stricter = Desired(groups=(replace(group, retry_max_times=3),), topics=(topic,))
            todo, _, observed = await reconcile(admin, stricter)
            assert [(a.kind, a.broker) for a in todo.actions] == [
                (ActionKind.UPDATE_GROUP, "broker-a"),
                (ActionKind.UPDATE_GROUP, "broker-b"),
            ]
            for process in brokers.brokers.values():
                config = (await admin.group_configs(process.address))["topology-a"]
                assert config.retry_max_times == 3
            assert plan(stricter, observed).empty

    asyncio.run(scenario())


def test_a_retry_topic_deleted_out_of_band_is_recreated(brokers: Cluster) -> None:
    desired = Desired(groups=(DesiredGroup("topology-b", retry_queue_nums=3),))
    retry = "%RETRY%topology-b"
    broker_b = brokers.brokers["broker-b"].address

    async def scenario() -> None:
        async with AdminClient(brokers.name_servers) as admin:
            await reconcile(admin, desired)
            await admin.delete_topic(retry, brokers=[broker_b])
            assert retry not in await admin.topic_configs(broker_b)
            todo, _, observed = await reconcile(admin, desired)
            assert [(a.kind, a.name, a.broker) for a in todo.actions] == [
                (ActionKind.CREATE_TOPIC, retry, "broker-b")
            ]
            assert (await admin.topic_configs(broker_b))[retry] == TopicConfig(
                retry, 3, 3, PERM_READ_WRITE
            )
            assert plan(desired, observed).empty

            async def routed() -> bool:
                route = await admin.route(retry)
                return route is not None and len(route.read_queues) == 6

            await eventually(routed, what=f"route of {retry} on both brokers")

    asyncio.run(scenario())


def test_delete_waits_for_the_dead_letter_topic_unless_forced(brokers: Cluster) -> None:
    group = DesiredGroup("topology-c", deletion_policy=DeletionPolicy.DELETE)
    dlq = "%DLQ%topology-c"
    removal = group.removal()
    assert removal == Removal(Kind.GROUP, "topology-c")
    removing = Desired(removals=(removal,))

    async def scenario() -> None:
        async with AdminClient(brokers.name_servers) as admin:
            await reconcile(admin, Desired(groups=(group,)))

            async def routed() -> bool:
                route = await admin.route(dlq)
                return route is not None and len(route.write_queues) == 2

            await eventually(routed, what=f"route of {dlq}")
            async with Producer(brokers.name_servers, "topology-test") as producer:
                await producer.send(Message(dlq, b"a dead letter"))

            async def held() -> Plan | None:
                todo = plan(removing, await observe(admin, removing, cluster=CLUSTER))
                return todo if todo.refusals else None

            refused = await eventually(held, what="the dead letter counted")
            assert refused.empty
            assert refused.refusals[0].reason.startswith(f"{dlq} holds dead letters (1 on broker-")
            for process in brokers.brokers.values():
                assert "topology-c" in await admin.group_configs(process.address)

            forced = Desired(removals=(Removal(Kind.GROUP, "topology-c", force=True),))
            _, result, observed = await reconcile(admin, forced)
            assert [a.kind for a in result.done].count(ActionKind.DELETE_GROUP) == 2
            assert [a.kind for a in result.done].count(ActionKind.DELETE_ROUTE) == 2
            for process in brokers.brokers.values():
                assert "topology-c" not in await admin.group_configs(process.address)
                topics = await admin.topic_configs(process.address)
                assert {"%RETRY%topology-c", dlq}.isdisjoint(topics)
            assert plan(forced, observed).empty

            async def unrouted() -> bool:
                return await admin.route(dlq) is None

            await eventually(unrouted, what=f"route of {dlq} removed")

    asyncio.run(scenario())
