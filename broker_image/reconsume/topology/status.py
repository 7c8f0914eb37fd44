"""Status of a group or topic from an observation and its plan: per broker whether it is as
desired, and the retry and dead-letter depths, in the shape of the resources' ``status``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconsume.message.names import dead_letter_topic
from reconsume.topology.model import DesiredGroup, DesiredTopic, Kind
from reconsume.topology.observe import BrokerState, Observed
from reconsume.topology.plan import Plan


def retry_depth(observed: Observed, group: str) -> int:
    """Retries in ``%RETRY%<group>`` the group has not consumed, over the reachable brokers."""
    return sum(b.retry_depths.get(group, 0) for b in observed.reachable)


def dead_letter_depth(observed: Observed, group: str) -> int:
    """Dead letters kept in ``%DLQ%<group>``, over the reachable brokers."""
    topic = dead_letter_topic(group)
    return sum(b.depths.get(topic, 0) for b in observed.reachable)


def topic_depth(observed: Observed, topic: str) -> int:
    """Messages stored in ``topic``, over the reachable brokers."""
    return sum(b.depths.get(topic, 0) for b in observed.reachable)


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """One object on one broker."""

    name: str
    address: str
    ready: bool
    message: str | None = None
    counts: tuple[tuple[str, int], ...] = ()
    """Depths (and queue counts) in the status's field names, e.g. ``("retryDepth", 3)``."""

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"name": self.name, "address": self.address}
        status["ready"] = self.ready
        status.update(self.counts)
        if self.message:
            status["message"] = self.message
        return status


@dataclass(frozen=True, slots=True)
class ObjectStatus:
    """A group or topic over the whole cluster."""

    ready: bool
    reason: str
    """CamelCase reason of the Ready condition."""
    message: str
    brokers: tuple[BrokerStatus, ...]
    fields: tuple[tuple[str, Any], ...]
    """Further status fields (``retryTopic``, ``deadLetterDepth``, ``depth`` ...)."""

    def to_status(self) -> dict[str, Any]:
        """The resource's ``status`` fields (conditions and observedGeneration aside)."""
        status = dict(self.fields)
        status["brokers"] = [b.to_status() for b in self.brokers]
        return status


Counts = Callable[[BrokerState], tuple[tuple[str, int], ...]]


def _broker_statuses(
    kind: Kind, name: str, observed: Observed, plan: Plan, counts: Counts
) -> tuple[BrokerStatus, ...]:
    statuses = []
    for broker in observed.brokers:
        if not broker.reachable:
            statuses.append(BrokerStatus(broker.name, broker.address, False, broker.error))
            continue
        pending = [a for a in plan.for_owner(kind, name) if a.broker == broker.name]
        message = "; ".join(a.describe() for a in pending) or None
        statuses.append(
            BrokerStatus(broker.name, broker.address, not pending, message, counts(broker))
        )
    return tuple(statuses)


def _summary(
    kind: Kind, name: str, observed: Observed, plan: Plan, brokers: tuple[BrokerStatus, ...]
) -> tuple[bool, str, str]:
    """Ready, and the Ready condition's reason and message."""
    refusals = [r.reason for r in plan.refusals if r.owner == (kind, name)]
    if refusals:
        return False, "DeletionRefused", "; ".join(refusals)
    if not observed.brokers:
        return False, "NoBrokers", "; ".join(plan.warnings) or "no broker is registered"
    if observed.unreachable:
        details = "; ".join(f"{b.name}: {b.error}" for b in observed.unreachable)
        return False, "BrokerUnreachable", details
    pending = [b for b in brokers if not b.ready]
    if pending:
        return False, "Pending", "; ".join(f"{b.name}: {b.message}" for b in pending)
    return True, "Reconciled", f"configured on {len(brokers)} broker(s)"


def group_status(group: DesiredGroup, observed: Observed, plan: Plan) -> ObjectStatus:
    """A ConsumerGroup's status: ready once no action of ``plan`` is left for it (pass the
    plan made from ``observed``, or an empty plan after applying it successfully)."""

    def counts(broker: BrokerState) -> tuple[tuple[str, int], ...]:
        dlq = group.dead_letter_topic
        return (
            ("retryDepth", broker.retry_depths.get(group.name, 0)),
            ("deadLetterDepth", broker.depths.get(dlq, 0) if dlq else 0),
        )

    brokers = _broker_statuses(Kind.GROUP, group.name, observed, plan, counts)
    ready, reason, message = _summary(Kind.GROUP, group.name, observed, plan, brokers)
    fields: list[tuple[str, Any]] = [("groupName", group.name)]
    if group.retry_topic is not None and group.dead_letter_topic is not None:
        fields += [("retryTopic", group.retry_topic), ("deadLetterTopic", group.dead_letter_topic)]
    fields += [
        ("retryDepth", retry_depth(observed, group.name)),
        ("deadLetterDepth", dead_letter_depth(observed, group.name)),
    ]
    return ObjectStatus(ready, reason, message, brokers, tuple(fields))


def topic_status(topic: DesiredTopic, observed: Observed, plan: Plan) -> ObjectStatus:
    """A Topic's status, like :func:`group_status`."""

    def counts(broker: BrokerState) -> tuple[tuple[str, int], ...]:
        config = broker.topics.get(topic.name)
        queues = (
            (("readQueueNums", config.read_queue_nums), ("writeQueueNums", config.write_queue_nums))
            if config is not None
            else ()
        )
        return (*queues, ("depth", broker.depths.get(topic.name, 0)))

    brokers = _broker_statuses(Kind.TOPIC, topic.name, observed, plan, counts)
    ready, reason, message = _summary(Kind.TOPIC, topic.name, observed, plan, brokers)
    fields = (("topicName", topic.name), ("depth", topic_depth(observed, topic.name)))
    return ObjectStatus(ready, reason, message, brokers, fields)
