"""What the brokers of a cluster report: group and topic configs, and queue depths.

:func:`observe` asks every broker master the name servers list (of one RocketMQ cluster, or
all) through the admin client. A broker that does not answer is recorded with its error rather
than failing the whole observation: the plan leaves it out and the status says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reconsume.client.admin import BrokerInfo
from reconsume.errors import ReconsumeError
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.message.names import (
    dead_letter_job_group,
    dead_letter_topic,
    group_of,
    is_dead_letter_topic,
    retry_topic,
)
from reconsume.topology.model import Desired, Kind


class TopologyAdmin(Protocol):
    """The admin operations topology uses (:class:`reconsume.client.admin.AdminClient`)."""

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]: ...

    async def group_configs(self, broker: str) -> dict[str, SubscriptionGroupConfig]: ...

    async def topic_configs(self, broker: str) -> dict[str, TopicConfig]: ...

    async def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int: ...

    async def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]: ...

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
        remove_offsets: bool = True,
    ) -> None: ...

    async def update_topic(
        self,
        config: TopicConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]: ...

    async def delete_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> None: ...

    async def delete_topic_route(self, topic: str, *, cluster: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class BrokerState:
    """One broker master as it answered (or the error it answered with)."""

    name: str
    address: str
    groups: Mapping[str, SubscriptionGroupConfig] = field(default_factory=dict)
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    depths: Mapping[str, int] = field(default_factory=dict)
    """Messages stored per topic, for the topics observed closely (dead-letter topics, the
    desired topics, topics to remove); for a dead-letter topic, those past the offsets of its
    dead-letter jobs (see ``dead_letter_job_group``)."""
    retry_depths: Mapping[str, int] = field(default_factory=dict)
    """Per group: retries in its retry topic the group has not consumed."""
    error: str | None = None

    @property
    def reachable(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class Observed:
    """Every broker master of a cluster (by name)."""

    brokers: tuple[BrokerState, ...] = ()
    cluster: str | None = None
    """The RocketMQ cluster observed; None: every broker the name servers know."""

    @property
    def reachable(self) -> tuple[BrokerState, ...]:
        return tuple(b for b in self.brokers if b.reachable)

    @property
    def unreachable(self) -> tuple[BrokerState, ...]:
        return tuple(b for b in self.brokers if not b.reachable)

    def broker(self, name: str) -> BrokerState | None:
        return next((b for b in self.brokers if b.name == name), None)


def watched_topics(desired: Desired) -> tuple[set[str], dict[str, str]]:
    """The topics whose stored messages matter for ``desired`` and, per retry topic, its
    group (whose unconsumed retries matter)."""
    stored: set[str] = {t.name for t in desired.topics}
    retries: dict[str, str] = {}
    for group in desired.groups:
        if group.dead_letter_topic is not None:
            stored.add(group.dead_letter_topic)
        if group.retry_topic is not None:
            retries[group.retry_topic] = group.name
    for removal in desired.removals:
        if removal.kind is Kind.GROUP:
            stored.add(dead_letter_topic(removal.name))
            retries[retry_topic(removal.name)] = removal.name
        else:
            stored.add(removal.name)
    return stored, retries


async def observe_broker(admin: TopologyAdmin, info: BrokerInfo, desired: Desired) -> BrokerState:
    """One broker master's configs and the depths ``desired`` needs."""
    assert info.master is not None
    address = info.master
    try:
        groups = await admin.group_configs(address)
        topics = await admin.topic_configs(address)
        stored, retries = watched_topics(desired)
        depths: dict[str, int] = {}
        for topic in sorted(stored):
            config = topics.get(topic)
            if config is not None:
                # A dead-letter topic's depth: what its jobs have not handled yet.
                owner = group_of(topic) if is_dead_letter_topic(topic) else None
                depths[topic] = await admin.broker_depth(
                    address,
                    topic,
                    config.read_queue_nums,
                    group=None if owner is None else dead_letter_job_group(owner),
                )
        retry_depths: dict[str, int] = {}
        for topic, group in sorted(retries.items()):
            config = topics.get(topic)
            if config is not None:
                retry_depths[group] = await admin.broker_depth(
                    address, topic, config.read_queue_nums, group=group
                )
    except (ReconsumeError, OSError) as exc:
        return BrokerState(info.name, address, error=str(exc) or type(exc).__name__)
    return BrokerState(info.name, address, groups, topics, depths, retry_depths)


async def observe(
    admin: TopologyAdmin, desired: Desired, *, cluster: str | None = None
) -> Observed:
    """Ask every broker master of ``cluster`` (every cluster when None) what it has.

    Raises the admin client's error when no name server answers; a broker that does not answer
    is kept with its error."""
    infos = [info for info in await admin.brokers(cluster) if info.master is not None]
    states = await asyncio.gather(*(observe_broker(admin, info, desired) for info in infos))
    return Observed(tuple(sorted(states, key=lambda s: s.name)), cluster)
