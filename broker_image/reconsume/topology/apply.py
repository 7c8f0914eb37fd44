"""Carrying a plan out through the admin client.

Every action is tried; one that fails is reported and the others still run (a broker that is
down must not keep the others from being configured). A route is deleted only once the topic
is gone from every broker the plan deleted it from.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconsume.errors import ReconsumeError
from reconsume.topology.observe import TopologyAdmin
from reconsume.topology.plan import Action, ActionKind, Plan


@dataclass(frozen=True, slots=True)
class Failure:
    action: Action
    error: str


@dataclass(frozen=True, slots=True)
class Applied:
    """What :func:`apply` did."""

    done: tuple[Action, ...] = ()
    failed: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    def describe(self) -> list[str]:
        return [f"{f.action.describe()}: {f.error}" for f in self.failed]


async def apply(plan: Plan, admin: TopologyAdmin) -> Applied:
    """Run the plan's actions in order; returns which succeeded and which failed (with the
    broker's or the connection's error)."""
    done: list[Action] = []
    failed: list[Failure] = []
    for action in plan.actions:
        if action.kind is ActionKind.DELETE_ROUTE and any(
            f.action.kind is ActionKind.DELETE_TOPIC and f.action.name == action.name
            for f in failed
        ):
            failed.append(Failure(action, "the topic could not be deleted from every broker"))
            continue
        try:
            await _run(action, plan, admin)
        except (ReconsumeError, OSError) as exc:
            failed.append(Failure(action, str(exc) or type(exc).__name__))
        else:
            done.append(action)
    return Applied(tuple(done), tuple(failed))


async def _run(action: Action, plan: Plan, admin: TopologyAdmin) -> None:
    kind = action.kind
    if kind is ActionKind.DELETE_ROUTE:
        await admin.delete_topic_route(action.name, cluster=plan.cluster)
        return
    assert action.address is not None, action
    brokers = [action.address]
    if kind in (ActionKind.CREATE_GROUP, ActionKind.UPDATE_GROUP):
        assert action.group is not None, action
        await admin.create_group(action.group, brokers=brokers)
    elif kind is ActionKind.DELETE_GROUP:
        await admin.delete_group(action.name, brokers=brokers, remove_offsets=True)
    elif kind in (ActionKind.CREATE_TOPIC, ActionKind.UPDATE_TOPIC):
        assert action.topic is not None, action
        await admin.update_topic(action.topic, brokers=brokers)
    elif kind is ActionKind.DELETE_TOPIC:
        await admin.delete_topic(action.name, brokers=brokers)
    else:  # pragma: no cover - every kind is handled above
        raise AssertionError(f"unknown action {kind}")
