"""The plan: what to change on which broker so that it has what is desired.

:func:`plan` is a pure function of the desired state and what the brokers reported. Applying
its actions and observing again yields an empty plan (idempotence). Per broker, for a desired
group: its subscription-group config (created, or updated keeping fields topology does not
manage), ``%RETRY%<group>`` with ``retryQueueNums`` write queues and read/write permission
(never fewer read queues than it has: the broker lowers those once drained), and
``%DLQ%<group>`` with one write queue and the permission ``deadLetter.readable`` asks for; for a
desired topic: its queues, permission and order flag; for a removal: deletes, refused while the
dead-letter topic (or the topic) holds messages unless forced.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig, TopicConfig
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.topology.model import Desired, DesiredGroup, DesiredTopic, Kind, Removal
from reconsume.topology.observe import BrokerState, Observed


class ActionKind(StrEnum):
    CREATE_GROUP = "CreateGroup"
    UPDATE_GROUP = "UpdateGroup"
    DELETE_GROUP = "DeleteGroup"
    CREATE_TOPIC = "CreateTopic"
    UPDATE_TOPIC = "UpdateTopic"
    DELETE_TOPIC = "DeleteTopic"
    DELETE_ROUTE = "DeleteRoute"
    """Remove a deleted topic's route from the name servers (no broker)."""


@dataclass(frozen=True, slots=True)
class Action:
    """One admin request to one broker (or, for DELETE_ROUTE, to the name servers)."""

    kind: ActionKind
    owner: tuple[Kind, str]
    """The group or topic (of the desired state) this action is for."""
    name: str
    """The group or topic the request names (``%RETRY%g`` for a retry topic of group g)."""
    broker: str | None = None
    address: str | None = None
    group: SubscriptionGroupConfig | None = None
    topic: TopicConfig | None = None
    reason: str = ""

    def describe(self) -> str:
        where = f" on {self.broker}" if self.broker else ""
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.kind} {self.name}{where}{why}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A removal not planned, and why."""

    owner: tuple[Kind, str]
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    warnings: tuple[str, ...] = ()
    cluster: str | None = None
    """The RocketMQ cluster whose name-server routes DELETE_ROUTE edits."""

    @property
    def empty(self) -> bool:
        """Nothing to change (refusals and warnings aside)."""
        return not self.actions

    def for_owner(self, kind: Kind, name: str) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.owner == (kind, name))

    def describe(self) -> list[str]:
        lines = [action.describe() for action in self.actions]
        lines += [f"refused: {r.owner[0]} {r.owner[1]}: {r.reason}" for r in self.refusals]
        lines += [f"warning: {w}" for w in self.warnings]
        return lines


def plan(desired: Desired, observed: Observed) -> Plan:
    """The actions that make every reachable broker of ``observed`` match ``desired``."""
    actions: list[Action] = []
    refusals: list[Refusal] = []
    warnings: list[str] = []
    reachable = observed.reachable
    if not observed.brokers:
        where = f"cluster {observed.cluster}" if observed.cluster else "the name servers"
        warnings.append(f"no broker is registered with {where}")
    warnings += [
        f"broker {b.name} ({b.address}) did not answer: {b.error}" for b in observed.unreachable
    ]
    for group in desired.groups:
        for broker in reachable:
            actions += _group_actions(group, broker)
        for subscribed in group.subscriptions:
            if reachable and not any(subscribed in b.topics for b in reachable):
                warnings.append(
                    f"group {group.name} subscribes to {subscribed}, which no broker has"
                )
    for topic in desired.topics:
        for broker in reachable:
            actions += _topic_actions(topic, broker)
    for removal in desired.removals:
        planned, refusal = _removal_actions(removal, observed)
        actions += planned
        if refusal is not None:
            refusals.append(refusal)
    return Plan(tuple(actions), tuple(refusals), tuple(warnings), observed.cluster)


def _group_actions(group: DesiredGroup, broker: BrokerState) -> list[Action]:
    owner = (Kind.GROUP, group.name)
    actions: list[Action] = []
    current = broker.groups.get(group.name)
    if current is None:
        config = group.config()
        actions.append(
            _on(broker, ActionKind.CREATE_GROUP, owner, group.name, "absent", group=config)
        )
    elif differences := group.differences(current):
        reason = "; ".join(differences)
        config = group.config(current)
        actions.append(
            _on(broker, ActionKind.UPDATE_GROUP, owner, group.name, reason, group=config)
        )
    if group.retry_topic is not None and group.retry_queue_nums > 0:
        action = _queue_topic(
            broker, owner, group.retry_topic, group.retry_queue_nums, PERM_READ_WRITE
        )
        if action is not None:
            actions.append(action)
    if group.dead_letter_topic is not None:
        action = _queue_topic(broker, owner, group.dead_letter_topic, 1, group.dead_letter_perm)
        if action is not None:
            actions.append(action)
    return actions


def _queue_topic(
    broker: BrokerState, owner: tuple[Kind, str], name: str, writes: int, perm: int
) -> Action | None:
    """A retry or dead-letter topic: ``writes`` write queues, at least as many read queues
    (more while removed queues drain; topology never lowers the read count), ``perm``."""
    current = broker.topics.get(name)
    if current is None:
        config = TopicConfig(name, writes, writes, perm)
        return _on(broker, ActionKind.CREATE_TOPIC, owner, name, "absent", topic=config)
    differences = []
    if current.write_queue_nums != writes:
        differences.append(f"writeQueueNums {current.write_queue_nums} -> {writes}")
    if current.read_queue_nums < writes:
        differences.append(f"readQueueNums {current.read_queue_nums} -> {writes}")
    if current.perm != perm:
        differences.append(f"perm {current.perm} -> {perm}")
    if not differences:
        return None
    config = current.with_changes(
        read_queue_nums=max(writes, current.read_queue_nums), write_queue_nums=writes, perm=perm
    )
    reason = "; ".join(differences)
    return _on(broker, ActionKind.UPDATE_TOPIC, owner, name, reason, topic=config)


def _topic_actions(topic: DesiredTopic, broker: BrokerState) -> list[Action]:
    owner = (Kind.TOPIC, topic.name)
    current = broker.topics.get(topic.name)
    if current is None:
        config = topic.config()
        return [_on(broker, ActionKind.CREATE_TOPIC, owner, topic.name, "absent", topic=config)]
    differences = topic.differences(current)
    if not differences:
        return []
    config = current.with_changes(
        read_queue_nums=topic.queues,
        write_queue_nums=topic.queues,
        perm=topic.permission.bits,
        order=topic.order,
    )
    reason = "; ".join(differences)
    return [_on(broker, ActionKind.UPDATE_TOPIC, owner, topic.name, reason, topic=config)]


def _removal_actions(removal: Removal, observed: Observed) -> tuple[list[Action], Refusal | None]:
    """Deletes on every reachable broker, or a refusal while messages would be lost."""
    owner = (removal.kind, removal.name)
    if removal.kind is Kind.GROUP:
        guarded = dead_letter_topic(removal.name)
        topics = [retry_topic(removal.name), guarded]
        what = "dead letters"
    else:
        guarded = removal.name
        topics = [removal.name]
        what = "messages"
    if not removal.force:
        refusal = _removal_refusal(removal, guarded, what, observed)
        if refusal is not None:
            return [], refusal
    actions: list[Action] = []
    deleted: set[str] = set()
    for broker in observed.reachable:
        if removal.kind is Kind.GROUP and removal.name in broker.groups:
            actions.append(_on(broker, ActionKind.DELETE_GROUP, owner, removal.name, "removed"))
        for topic in topics:
            if topic in broker.topics:
                actions.append(_on(broker, ActionKind.DELETE_TOPIC, owner, topic, "removed"))
                deleted.add(topic)
    actions += [
        Action(ActionKind.DELETE_ROUTE, owner, topic, reason="deleted from every broker")
        for topic in topics
        if topic in deleted
    ]
    return actions, None


def _removal_refusal(
    removal: Removal, guarded: str, what: str, observed: Observed
) -> Refusal | None:
    """Why ``removal`` must wait: ``guarded`` holds messages (or may: a broker did not answer,
    or its depth is unknown)."""
    held = []
    for broker in observed.reachable:
        if guarded not in broker.topics:
            continue
        depth = broker.depths.get(guarded)
        if depth is None:
            held.append(f"an unknown number on {broker.name}")
        elif depth > 0:
            held.append(f"{depth} on {broker.name}")
    reasons = []
    if held:
        reasons.append(f"{guarded} holds {what} ({', '.join(held)})")
    if observed.unreachable:
        names = ", ".join(b.name for b in observed.unreachable)
        reasons.append(f"brokers {names} did not answer")
    if not reasons:
        return None
    reasons.append('annotate the resource reconsume.io/force-delete: "true" to delete anyway')
    return Refusal((removal.kind, removal.name), "; ".join(reasons))


def _on(
    broker: BrokerState,
    kind: ActionKind,
    owner: tuple[Kind, str],
    name: str,
    reason: str,
    *,
    group: SubscriptionGroupConfig | None = None,
    topic: TopicConfig | None = None,
) -> Action:
    return Action(kind, owner, name, broker.name, broker.address, group, topic, reason)
