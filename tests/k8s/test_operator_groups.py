"""The operator on a real API server against two local brokers (BrokerCluster.spec.external):
a ConsumerGroup becomes Ready with its config and topics on both brokers, follows spec
changes (its consume type too), repairs drift, reports a stopped broker, honours pause and
resolves conflicts."""

from __future__ import annotations

import signal
from typing import Any

from kopf.testing import KopfRunner

from reconsume.client.admin import AdminClient
from reconsume.message.configs import SubscriptionGroupConfig

from ..integration.cluster import Cluster
from ..integration.processes import start_server
from .operator_support import (
    DRIFT_S,
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

GROUP_NAME = "GID_orders"
RETRY = f"%RETRY%{GROUP_NAME}"
DLQ = f"%DLQ%{GROUP_NAME}"
CG = "consumergroups"


def external_cluster(resources: Resources, brokers: Cluster) -> None:
    resources.create(
        "brokerclusters", "orders", {"external": {"nameServer": brokers.namesrv.address}}
    )


def group_spec(**extra: Any) -> dict[str, Any]:
    return {"cluster": "orders", "groupName": GROUP_NAME, "retry": {"maxTimes": 5}, **extra}


def max_times(brokers: Cluster) -> dict[str, int | None]:
    """retryMaxTimes of the group per broker (None: no config)."""
    return {name: None if c is None else c.retry_max_times for name, c in configs(brokers).items()}


def consume_types(brokers: Cluster) -> dict[str, str | None]:
    """The group's consume type per broker (None: no config)."""
    return {name: None if c is None else c.consume_type for name, c in configs(brokers).items()}


def configs(brokers: Cluster) -> dict[str, SubscriptionGroupConfig | None]:
    async def read(admin: AdminClient) -> dict[str, SubscriptionGroupConfig | None]:
        found: dict[str, SubscriptionGroupConfig | None] = {}
        for name, process in brokers.brokers.items():
            found[name] = (await admin.group_configs(process.address)).get(GROUP_NAME)
        return found

    return run_admin(brokers.name_servers, read)


def configured_events(resources: Resources, text: str) -> int:
    """How many ``Configured`` events of the namespace mention ``text``."""
    return sum(text in message for message in resources.events("Configured"))


def topics_on(brokers: Cluster, name: str) -> set[str]:
    async def read(admin: AdminClient) -> set[str]:
        return set(await admin.topic_configs(brokers.brokers[name].address))

    return run_admin(brokers.name_servers, read)


def test_group_becomes_ready_follows_changes_and_repairs_drift(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    external_cluster(resources, brokers)
    resources.create(CG, "orders-consumer", group_spec())
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")
    status = (resources.get(CG, "orders-consumer") or {})["status"]
    assert status["retryTopic"] == RETRY
    assert status["deadLetterTopic"] == DLQ
    assert {b["name"] for b in status["brokers"]} == {"broker-a", "broker-b"}
    assert all(b["ready"] for b in status["brokers"])
    assert status["observedGeneration"] == 1
    assert max_times(brokers) == {"broker-a": 5, "broker-b": 5}
    assert consume_types(brokers) == {"broker-a": "ANY", "broker-b": "ANY"}
    for name in brokers.brokers:
        assert {RETRY, DLQ} <= topics_on(brokers, name)

    resources.patch(
        CG, "orders-consumer", {"spec": {"retry": {"maxTimes": 2}, "consumeType": "Pop"}}
    )
    eventually(lambda: max_times(brokers) == {"broker-a": 2, "broker-b": 2}, 30, "maxTimes 2")
    assert consume_types(brokers) == {"broker-a": "POP", "broker-b": "POP"}

    # a retry topic deleted by hand comes back within the drift interval: the operator says it
    # created it again (the topic itself may be back before the test could look)
    created = f"{RETRY} on broker-a (absent)"
    before = eventually(lambda: configured_events(resources, created), 10, "creation event")
    address = brokers.brokers["broker-a"].address
    run_admin(brokers.name_servers, lambda admin: admin.delete_topic(RETRY, brokers=[address]))
    eventually(
        lambda: configured_events(resources, created) > before, 5 * DRIFT_S + 10, "retry back"
    )
    assert RETRY in topics_on(brokers, "broker-a")

    # the cluster's status lists the brokers its name server knows
    cluster = resources.get("brokerclusters", "orders") or {}
    assert cluster.get("status", {}).get("nameServer") == brokers.namesrv.address


def test_brokers_and_name_servers_that_stop_answering_make_the_group_not_ready(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    external_cluster(resources, brokers)
    resources.create(CG, "orders-consumer", group_spec())
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")

    # A stopped (not exited) broker stays registered and stops answering. A broker that exits
    # is forgotten by the name server at once, and an external cluster has no expected count.
    frozen = brokers.brokers["broker-b"].process
    frozen.send_signal(signal.SIGSTOP)
    try:
        condition = resources.wait_condition(CG, "orders-consumer", "False", "BrokerUnreachable")
        assert "broker-b" in condition["message"]
    finally:
        frozen.send_signal(signal.SIGCONT)
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")

    address = brokers.namesrv.address
    brokers.namesrv.kill()
    condition = resources.wait_condition(CG, "orders-consumer", "False", "NameServerUnreachable")
    assert address in condition["message"]
    brokers.namesrv = start_server("namesrv", "--listen", address)
    brokers.wait_registered()
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")


def test_the_younger_of_two_claims_is_in_conflict_and_not_applied(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    external_cluster(resources, brokers)
    resources.create(CG, "a-first", group_spec())
    resources.wait_condition(CG, "a-first", "True", "Reconciled")
    resources.create(CG, "b-second", group_spec(retry={"maxTimes": 9}))
    condition = resources.wait_condition(CG, "b-second", "False", "Conflict")
    assert "a-first" in condition["message"]
    assert resources.wait_condition(CG, "b-second", "True", kind="Conflict")
    # the owner's settings stay on the brokers across drift checks
    owner = resources.get(CG, "a-first") or {}
    seen = owner["status"]["depthTime"]
    eventually(lambda: (resources.get(CG, "a-first") or {})["status"]["depthTime"] != seen, 20)
    assert max_times(brokers) == {"broker-a": 5, "broker-b": 5}


def test_a_paused_group_is_left_alone_until_resumed(
    resources: Resources, brokers: Cluster, operator: KopfRunner
) -> None:
    external_cluster(resources, brokers)
    resources.create(CG, "orders-consumer", group_spec())
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")

    resources.patch(
        CG,
        "orders-consumer",
        {
            "metadata": {"annotations": {"reconsume.io/paused": "true"}},
            "spec": {"retry": {"maxTimes": 7}},
        },
    )
    resources.wait_condition(CG, "orders-consumer", "True", "Paused", kind="Paused")

    def paused_generation_seen() -> bool:
        paused = resources.condition(CG, "orders-consumer", "Paused") or {}
        return paused.get("observedGeneration") == 2 and paused.get("status") == "True"

    eventually(paused_generation_seen, 20, "paused at generation 2")
    assert max_times(brokers) == {"broker-a": 5, "broker-b": 5}

    resources.patch(
        CG, "orders-consumer", {"metadata": {"annotations": {"reconsume.io/paused": None}}}
    )
    resources.wait_condition(CG, "orders-consumer", "False", kind="Paused")
    eventually(lambda: max_times(brokers) == {"broker-a": 7, "broker-b": 7}, 30, "maxTimes 7")
