"""Scaling a BrokerCluster's brokers down: the decision as a pure function, the undrained rule,
the observation against an in-memory cluster, and the operator's name-server address."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from reconsume.client.admin import BrokerInfo
from reconsume.errors import RemotingConnectError
from reconsume.message.configs import TopicConfig
from reconsume.topology.clusters import cluster_spec
from reconsume_operator.children import children
from reconsume_operator.clusters import operator_address
from reconsume_operator.config import OperatorConfig
from reconsume_operator.scale_down import (
    BrokerDrain,
    counted,
    observe_drain,
    removed_brokers,
    scale_decision,
    topic_undrained,
    unobservable,
)


def test_nothing_to_remove_applies_the_spec() -> None:
    assert removed_brokers("orders", None, 2) == []
    assert removed_brokers("orders", 2, 3) == []
    assert removed_brokers("orders", 3, 3) == []
    assert scale_decision("orders", None, 2, {}).replicas == 2  # no StatefulSet yet
    growing = scale_decision("orders", 2, 4, {})
    assert (growing.replicas, growing.blocked, growing.message) == (4, False, "")


def test_the_brokers_removed_are_the_highest_ordinals() -> None:
    assert removed_brokers("orders", 4, 2) == ["orders-broker-2", "orders-broker-3"]


def test_drained_brokers_are_removed() -> None:
    drains = {
        "orders-broker-2": BrokerDrain("orders-broker-2"),
        "orders-broker-3": BrokerDrain("orders-broker-3", {"payments": 0}),
    }
    decision = scale_decision("orders", 4, 2, drains)
    assert (decision.replicas, decision.blocked) == (2, False)
    # What the ScalingDown event says.
    assert decision.removing == ("orders-broker-2", "orders-broker-3")
    assert decision.message == (
        "scaling brokers down from 4 to 2: orders-broker-2, orders-broker-3 drained "
        "(no undrained messages)"
    )
    assert scale_decision("orders", 2, 2, {}).removing == ()


def test_undrained_messages_keep_the_replicas_and_name_broker_and_count() -> None:
    drains = {
        "orders-broker-1": BrokerDrain("orders-broker-1"),
        "orders-broker-2": BrokerDrain("orders-broker-2", {"payments": 100, "%DLQ%GID_a": 20}),
    }
    decision = scale_decision("orders", 3, 1, drains)
    assert (decision.replicas, decision.blocked) == (3, True)
    assert "orders-broker-2 holds 120 undrained messages (payments: 100, %DLQ%GID_a: 20)" in (
        decision.message
    )
    assert "orders-broker-1" not in decision.message
    assert "from 3 to 1" in decision.message
    single = scale_decision("orders", 2, 1, {"orders-broker-1": BrokerDrain("x", {"t": 1})})
    assert "orders-broker-1 holds 1 undrained message (t: 1)" in single.message


def test_many_topics_are_summarised() -> None:
    undrained = {f"t{i}": i + 1 for i in range(8)}
    decision = scale_decision("orders", 2, 1, {"orders-broker-1": BrokerDrain("b", undrained)})
    assert "holds 36 undrained messages (t7: 8, t6: 7, t5: 6, t4: 5, t3: 4, 3 more topic(s))" in (
        decision.message
    )


def test_unreachable_or_unobserved_brokers_keep_the_replicas() -> None:
    down = scale_decision(
        "orders", 3, 2, {"orders-broker-2": BrokerDrain("orders-broker-2", error="timed out")}
    )
    assert (down.replicas, down.blocked) == (3, True)
    assert "orders-broker-2 cannot be checked: timed out" in down.message
    missing = scale_decision("orders", 3, 2, {})
    assert missing.blocked
    assert "orders-broker-2 was not observed" in missing.message
    names = ["orders-broker-1", "orders-broker-2"]
    no_namesrv = scale_decision("orders", 3, 1, unobservable(names, "name server down"))
    assert no_namesrv.blocked
    assert no_namesrv.message.count("cannot be checked: name server down") == 2


def test_the_undrained_rule_per_topic() -> None:
    assert topic_undrained(50, {}) == 50  # no group: everything stored
    assert topic_undrained(50, {"a": 0, "b": 7}) == 7  # the group furthest behind
    assert topic_undrained(50, {"a": 0}) == 0
    assert topic_undrained(-1, {}) == 0
    assert not counted("SCHEDULE_TOPIC_XXXX")
    assert not counted("TBW102")
    assert not counted("rmq_sys_wheel_timer")
    assert counted("payments")
    assert counted("%RETRY%GID_a")
    assert counted("%DLQ%GID_a")


@dataclass
class Broker:
    address: str
    topics: dict[str, int] = field(default_factory=dict)
    """Messages stored per topic."""
    lags: dict[tuple[str, str], int] = field(default_factory=dict)
    """(topic, group) -> messages the group has not consumed."""
    down: bool = False


@dataclass
class DrainFake:
    """The admin operations of the drain check over in-memory brokers."""

    by_name: dict[str, Broker]
    queues_asked: list[int] = field(default_factory=list)

    def _at(self, address: str) -> Broker:
        broker = next(b for b in self.by_name.values() if b.address == address)
        if broker.down:
            raise RemotingConnectError(f"connect to {address} failed")
        return broker

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        assert cluster == "orders"
        return [BrokerInfo(n, "orders", b.address, {0: b.address}) for n, b in self.by_name.items()]

    async def topic_configs(self, broker: str) -> dict[str, TopicConfig]:
        return {t: TopicConfig(t, 4, 2) for t in self._at(broker).topics}

    async def topic_groups(self, broker: str, topic: str) -> list[str]:
        return sorted(g for t, g in self._at(broker).lags if t == topic)

    async def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int:
        self.queues_asked.append(queues)
        state = self._at(broker)
        if group is None:
            return state.topics[topic]
        return state.lags[topic, group]


def test_observing_counts_per_topic_with_and_without_groups() -> None:
    admin = DrainFake(
        {
            "orders-broker-1": Broker(
                "127.0.0.1:2",
                {"payments": 30, "audit": 12, "%DLQ%GID_a": 3, "SCHEDULE_TOPIC_XXXX": 99},
                {("payments", "GID_a"): 5, ("payments", "GID_b"): 9, ("audit", "GID_a"): 0},
            ),
            "orders-broker-2": Broker("127.0.0.1:3", {"payments": 4}, down=True),
        }
    )
    names = ["orders-broker-1", "orders-broker-2", "orders-broker-3"]
    drains = asyncio.run(observe_drain(admin, "orders", names))
    assert drains["orders-broker-1"].undrained == {"payments": 9, "%DLQ%GID_a": 3}
    assert drains["orders-broker-1"].total == 12
    assert set(admin.queues_asked) == {4}  # max(read, write) queues
    assert "127.0.0.1:3" in (drains["orders-broker-2"].error or "")
    assert drains["orders-broker-3"].error == "not registered with the name servers"
    decision = scale_decision("orders", 4, 1, drains)
    assert decision.blocked
    assert "orders-broker-1 holds 12 undrained messages" in decision.message


def test_the_operator_reaches_name_servers_through_its_template() -> None:
    run = cluster_spec({"metadata": {"name": "orders", "namespace": "shop"}}, "img")
    assert operator_address(run) == "orders-namesrv.shop.svc:9876"
    assert operator_address(run, "{cluster}.{namespace}.example:9876") == "orders.shop.example:9876"
    assert operator_address(run, "127.0.0.1:4000") == "127.0.0.1:4000"
    external = cluster_spec(
        {"metadata": {"name": "legacy"}, "spec": {"external": {"nameServer": "ns:9876"}}}, "img"
    )
    assert operator_address(external, "127.0.0.1:4000") == "ns:9876"
    config = OperatorConfig.from_env({"RECONSUME_NAMESERVER_ADDRESS_TEMPLATE": "{cluster}:1"})
    assert config.name_server_template == "{cluster}:1"
    assert OperatorConfig.from_env({}).name_server_template is None
    with pytest.raises(ValueError, match="may use only"):
        OperatorConfig(name_server_template="{pod}:9876")


def test_the_statefulset_can_keep_other_replicas_than_the_spec() -> None:
    spec = cluster_spec({"metadata": {"name": "orders"}, "spec": {"brokers": 2}}, "img")
    (sts,) = [o for o in children(spec, 3) if o["kind"] == "StatefulSet"]
    assert sts["spec"]["replicas"] == 3
    (sts,) = [o for o in children(spec) if o["kind"] == "StatefulSet"]
    assert sts["spec"]["replicas"] == 2
