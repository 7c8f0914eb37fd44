"""An in-memory cluster behind the :class:`~reconsume.topology.observe.TopologyAdmin` protocol,
for unit tests of topology and its drivers, with a reconsume broker's rules for retry topics
(read queues never drop below the current count on an update).

It lives beside the protocol so that mypy checks it against the protocol with the package
(:func:`_conforms`): a change to the protocol that the fake does not follow fails ``make lint``,
not a test at run time. The real implementation is :class:`reconsume.client.admin.AdminClient`,
which the integration tier runs against real brokers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconsume.client.admin import BrokerInfo
from reconsume.errors import RemotingConnectError
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.message.names import (
    dead_letter_job_group,
    group_of,
    is_dead_letter_topic,
    is_retry_topic,
)
from reconsume.topology.observe import TopologyAdmin


@dataclass
class FakeBroker:
    name: str
    address: str
    groups: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    topics: dict[str, TopicConfig] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=dict)
    """Messages per topic (max - min over its queues)."""
    unconsumed: dict[str, int] = field(default_factory=dict)
    """Per group: retries not consumed."""
    handled: dict[str, int] = field(default_factory=dict)
    """Per dead-letter topic: dead letters its jobs have handled (of those stored)."""
    down: bool = False


@dataclass
class FakeAdmin:
    brokers_: list[FakeBroker]
    cluster_name: str = "test"
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(request, name, broker address) in order."""
    routes_deleted: list[tuple[str, str | None]] = field(default_factory=list)
    fail: set[tuple[str, str]] = field(default_factory=set)
    """(request, address) pairs that fail."""

    def _broker(self, address: str, request: str) -> FakeBroker:
        broker = next(b for b in self.brokers_ if b.address == address)
        if broker.down or (request, address) in self.fail:
            raise RemotingConnectError(f"connect to {address} failed")
        return broker

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        return [
            BrokerInfo(b.name, self.cluster_name, b.address, {0: b.address}) for b in self.brokers_
        ]

    async def group_configs(self, broker: str) -> dict[str, SubscriptionGroupConfig]:
        return dict(self._broker(broker, "groups").groups)

    async def topic_configs(self, broker: str) -> dict[str, TopicConfig]:
        return dict(self._broker(broker, "topics").topics)

    async def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int:
        state = self._broker(broker, "depth")
        if group is not None and is_dead_letter_topic(topic):
            assert group == dead_letter_job_group(group_of(topic) or "")
            return state.stored.get(topic, 0) - state.handled.get(topic, 0)
        if group is not None:
            return state.unconsumed.get(group, 0)
        return state.stored.get(topic, 0)

    async def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]:
        assert brokers is not None
        for address in brokers:
            self.requests.append(("create_group", config.group_name, address))
            # what the broker stores is what it reads back from the JSON
            stored = SubscriptionGroupConfig.from_dict(config.to_dict())
            self._broker(address, "create_group").groups[config.group_name] = stored
        return list(brokers)

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
        remove_offsets: bool = True,
    ) -> None:
        assert brokers is not None
        for address in brokers:
            self.requests.append(("delete_group", group, address))
            self._broker(address, "delete_group").groups.pop(group, None)

    async def update_topic(
        self,
        config: TopicConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]:
        assert brokers is not None
        for address in brokers:
            self.requests.append(("update_topic", config.topic_name, address))
            broker = self._broker(address, "update_topic")
            current = broker.topics.get(config.topic_name)
            if is_retry_topic(config.topic_name) and current is not None:
                reads = max(config.read_queue_nums, current.read_queue_nums)
                config = config.with_changes(read_queue_nums=reads)
            broker.topics[config.topic_name] = config
        return list(brokers)

    async def delete_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> None:
        assert brokers is not None
        for address in brokers:
            self.requests.append(("delete_topic", topic, address))
            self._broker(address, "delete_topic").topics.pop(topic, None)

    async def delete_topic_route(self, topic: str, *, cluster: str | None = None) -> None:
        self.requests.append(("delete_route", topic, ""))
        self.routes_deleted.append((topic, cluster))


def _conforms(admin: FakeAdmin) -> TopologyAdmin:
    """Never called: mypy checks here that :class:`FakeAdmin` satisfies the protocol."""
    return admin
