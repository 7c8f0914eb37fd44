"""Scaling an operator-run BrokerCluster's brokers down only once the brokers to remove are
drained.

Broker N is the StatefulSet's pod ``<cluster>-broker-N`` and a shard of its own: removing it
loses every message it stores. When ``spec.brokers`` drops below the StatefulSet's replicas,
the brokers with ordinals from ``spec.brokers`` up are observed through the name servers, and
the StatefulSet keeps its replicas while any of them holds undrained messages or cannot be
observed.

**Undrained messages** of a broker: the sum over every topic it has, except system topics
(:func:`reconsume.message.names.is_system_topic`: ``SCHEDULE_TOPIC_XXXX``, ``TBW102``,
``rmq_sys_…``), of

* with consumer groups (the groups the broker says consume the topic: online with a
  subscription to it, or with committed offsets in it): the most any one group has not
  consumed, where a group's count is, summed over the topic's queues, max offset - the group's
  committed offset (the min offset when it has none or one below it);
* without: every message stored, max - min offset summed over the queues.

The queues counted are ``0 … max(readQueueNums, writeQueueNums) - 1``. A count of zero means
every consumer group has consumed every message of every topic on the broker.

:func:`scale_decision` is pure; :func:`observe_drain` asks the brokers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reconsume.client.admin import BrokerInfo
from reconsume.errors import ReconsumeError
from reconsume.message.configs import TopicConfig
from reconsume.message.names import is_system_topic
from reconsume_operator.naming import broker_name

BLOCKED = "ScaleDownBlocked"
"""The Ready reason while a scale-down waits."""
TOPICS_SHOWN = 5
"""Topics named per broker in the condition message (the largest counts)."""


class DrainAdmin(Protocol):
    """The admin operations the drain check uses (:class:`reconsume.client.admin.AdminClient`)."""

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]: ...

    async def topic_configs(self, broker: str) -> dict[str, TopicConfig]: ...

    async def topic_groups(self, broker: str, topic: str) -> list[str]: ...

    async def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int: ...


@dataclass(frozen=True, slots=True)
class BrokerDrain:
    """One broker to remove as observed: undrained messages per topic, or why it could not
    be observed."""

    name: str
    undrained: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def total(self) -> int:
        return sum(self.undrained.values())


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """The StatefulSet's replicas to apply; when ``blocked``, why (the Ready message)."""

    replicas: int
    blocked: bool = False
    message: str = ""
    removing: tuple[str, ...] = ()
    """Brokers this decision removes (observed drained)."""


def counted(topic: str) -> bool:
    """Whether a topic's messages count as undrained (every topic but system topics)."""
    return not is_system_topic(topic)


def topic_undrained(stored: int, group_lags: Mapping[str, int]) -> int:
    """A topic's undrained messages on one broker: the largest lag of the groups that consume
    it, or, with no group, every message stored."""
    if group_lags:
        return max(0, *group_lags.values())
    return max(0, stored)


def removed_brokers(cluster: str, current: int | None, desired: int) -> list[str]:
    """The broker names (pods) a change of replicas from ``current`` to ``desired`` removes;
    none when there is no StatefulSet yet or nothing is removed."""
    if current is None or desired >= current:
        return []
    return [f"{broker_name(cluster)}-{ordinal}" for ordinal in range(desired, current)]


def _describe(drain: BrokerDrain | None, name: str) -> str | None:
    """Why ``name`` may not be removed yet; None when it may."""
    if drain is None:
        return f"{name} was not observed"
    if drain.error is not None:
        return f"{name} cannot be checked: {drain.error}"
    total = drain.total
    if total == 0:
        return None
    largest = sorted((t for t in drain.undrained.items() if t[1] > 0), key=lambda t: (-t[1], t[0]))
    topics = ", ".join(f"{topic}: {count}" for topic, count in largest[:TOPICS_SHOWN])
    more = len(largest) - TOPICS_SHOWN
    if more > 0:
        topics += f", {more} more topic(s)"
    noun = "message" if total == 1 else "messages"
    return f"{name} holds {total} undrained {noun} ({topics})"


def scale_decision(
    cluster: str, current: int | None, desired: int, drains: Mapping[str, BrokerDrain]
) -> ScaleDecision:
    """The replicas to apply when the StatefulSet has ``current`` (None: none yet) and the
    spec asks for ``desired``: ``desired``, unless a broker to remove holds undrained messages
    or could not be observed (missing from ``drains``, or with an error); then ``current``."""
    removed = removed_brokers(cluster, current, desired)
    reasons = [r for name in removed if (r := _describe(drains.get(name), name)) is not None]
    if current is None or not reasons:
        if not removed:
            return ScaleDecision(desired)
        message = (
            f"scaling brokers down from {current} to {desired}: "
            f"{', '.join(removed)} drained (no undrained messages)"
        )
        return ScaleDecision(desired, message=message, removing=tuple(removed))
    message = (
        f"scaling brokers down from {current} to {desired} waits until the brokers to remove "
        f"are drained: {'; '.join(reasons)}"
    )
    return ScaleDecision(current, True, message)


async def broker_undrained(admin: DrainAdmin, address: str) -> dict[str, int]:
    """Undrained messages per counted topic of the broker at ``address`` (topics with none
    left out)."""
    found: dict[str, int] = {}
    for topic, config in sorted((await admin.topic_configs(address)).items()):
        if not counted(topic):
            continue
        queues = max(config.read_queue_nums, config.write_queue_nums)
        lags = {
            group: await admin.broker_depth(address, topic, queues, group=group)
            for group in await admin.topic_groups(address, topic)
        }
        stored = 0 if lags else await admin.broker_depth(address, topic, queues)
        if count := topic_undrained(stored, lags):
            found[topic] = count
    return found


async def observe_drain(
    admin: DrainAdmin, cluster: str | None, names: Sequence[str]
) -> dict[str, BrokerDrain]:
    """The brokers ``names`` as the name servers list them (of RocketMQ cluster ``cluster``):
    each one's undrained messages, or its error (not registered, did not answer). Raises the
    admin client's error when no name server answers."""
    registered = {info.name: info.master for info in await admin.brokers(cluster)}
    drains: dict[str, BrokerDrain] = {}
    for name in names:
        address = registered.get(name)
        if address is None:
            error = "not registered with the name servers"
            drains[name] = BrokerDrain(name, error=error)
            continue
        try:
            drains[name] = BrokerDrain(name, await broker_undrained(admin, address))
        except (ReconsumeError, OSError) as exc:
            drains[name] = BrokerDrain(name, error=f"{address}: {exc or type(exc).__name__}")
    return drains


def unobservable(names: Sequence[str], error: str) -> dict[str, BrokerDrain]:
    """Every broker of ``names`` with the same error (the name servers did not answer)."""
    return {name: BrokerDrain(name, error=error) for name in names}
