"""Deleting ConsumerGroups and Topics: Retain leaves them on the brokers, Delete removes them
but waits while dead letters are kept, until annotated reconsume.io/force-delete."""

from __future__ import annotations

import asyncio

from kopf.testing import KopfRunner

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message.model import Message

from ..integration.cluster import Cluster
from .operator_support import (
    Resources,
    brokers,
    crds,
    eventually,
    namespace,
    operator,
    resources,
    run_admin,
)

__all__ = ["brokers", "crds", "namespace", "operator", "resources"]

CG = "consumergroups"


def groups_on(brokers: Cluster) -> set[str]:
    async def read(admin: AdminClient) -> set[str]:
        found: set[str] = set()
        for process in brokers.brokers.values():
            found |= set(await admin.group_configs(process.address))
        return found

    return run_admin(brokers.name_servers, read)


def topics_on_any(brokers: Cluster) -> set[str]:
    async def read(admin: AdminClient) -> set[str]:
        found: set[str] = set()
        for process in brokers.brokers.values():
            found |= set(await admin.topic_configs(process.address))
        return found

    return run_admin(brokers.name_servers, read)


def setup(resources: Resources, brokers: Cluster) -> None:
    resources.create(
        "brokerclusters", "orders", {"external": {"nameServer": brokers.namesrv.address}}
    )
    resources.create(CG, "kept", {"cluster": "orders", "groupName": "GID_kept"})
    resources.create(
        CG, "dropped", {"cluster": "orders", "groupName": "GID_dropped", "deletionPolicy": "Delete"}
    )
    resources.create(
        "topics", "orders", {"cluster": "orders", "queues": 2, "deletionPolicy": "Delete"}
    )
    resources.wait_condition(CG, "kept", "True", "Reconciled")
    resources.wait_condition(CG, "dropped", "True", "Reconciled")
    resources.wait_condition("topics", "orders", "True", "Reconciled")


def test_retain_keeps_and_delete_removes(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    setup(resources, brokers)
    assert {"GID_kept", "GID_dropped"} <= groups_on(brokers)

    resources.delete(CG, "kept")
    resources.delete(CG, "dropped")
    resources.delete("topics", "orders")
    eventually(lambda: resources.get(CG, "kept") is None, 30, "kept released")
    eventually(lambda: resources.get(CG, "dropped") is None, 30, "dropped released")
    eventually(lambda: resources.get("topics", "orders") is None, 30, "topic released")
    groups = groups_on(brokers)
    assert "GID_kept" in groups
    assert "GID_dropped" not in groups
    topics = topics_on_any(brokers)
    assert {"%RETRY%GID_kept", "%DLQ%GID_kept"} <= topics
    assert not {"%RETRY%GID_dropped", "%DLQ%GID_dropped", "orders"} & topics
    # what was removed is told on the object (nothing for the retained one)
    deleted = eventually(lambda: resources.events("Deleted", "dropped"), 10, "Deleted event")
    assert "DeleteGroup GID_dropped" in " ".join(deleted)
    assert resources.events("Deleted", "kept") == []


def test_delete_waits_for_dead_letters_until_forced(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    setup(resources, brokers)

    async def dead_letter() -> None:
        async with Producer(brokers.name_servers, "dlq-writer") as producer:
            await producer.send(Message("%DLQ%GID_dropped", b"poison"))

    asyncio.run(dead_letter())
    resources.delete(CG, "dropped")
    condition = resources.wait_condition(CG, "dropped", "False", "DeletionRefused")
    assert "force-delete" in condition["message"]
    refused = eventually(lambda: resources.events("DeletionRefused", "dropped"), 10, "warning")
    assert refused[0] == condition["message"][:1_000]
    assert "GID_dropped" in groups_on(brokers)
    # another object's deletion goes ahead meanwhile
    resources.delete("topics", "orders")
    eventually(lambda: resources.get("topics", "orders") is None, 30, "topic released")

    resources.patch(
        CG, "dropped", {"metadata": {"annotations": {"reconsume.io/force-delete": "true"}}}
    )
    eventually(lambda: resources.get(CG, "dropped") is None, 30, "dropped released")
    assert "GID_dropped" not in groups_on(brokers)
    assert "%DLQ%GID_dropped" not in topics_on_any(brokers)
