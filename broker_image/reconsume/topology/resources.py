"""Reconciling one ConsumerGroup or Topic resource on its cluster's brokers, for every driver.

The operator's Kopf handlers turn a :class:`Result` into status, conditions, events and Kopf's
retry; embedded mode (:mod:`reconsume.embedded`) into its status file and log. The work itself is
the rest of :mod:`reconsume.topology`: desired state from the resource, observe, plan, apply,
observe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconsume.client.admin import AdminClient
from reconsume.errors import ReconsumeError
from reconsume.topology import (
    Desired,
    DesiredGroup,
    DesiredTopic,
    Kind,
    ObjectStatus,
    apply,
    group_from_resource,
    group_status,
    observe,
    plan,
    topic_from_resource,
    topic_status,
)
from reconsume.topology.observe import TopologyAdmin

FORCE_DELETE = "reconsume.io/force-delete"
PAUSED = "reconsume.io/paused"

AdminFactory = Callable[[str], AdminClient]
"""An admin client for a name-server address (``host:port``, several separated by ``;``)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a group or topic lives: the name servers of its BrokerCluster and the RocketMQ
    cluster name of its brokers (None: every broker the name servers know)."""

    name_server: str
    rocketmq_cluster: str | None


@dataclass(frozen=True, slots=True)
class Result:
    """One reconcile (or deletion): ready, the Ready condition's reason and message, the
    status fields (empty when nothing could be observed), and the changes made."""

    ready: bool
    reason: str
    message: str
    status: Mapping[str, Any]
    changes: tuple[str, ...] = ()
    retriable: bool = True
    """Whether trying again later may help (False: the spec itself is wrong)."""


def annotated(body: Mapping[str, Any], annotation: str) -> bool:
    """Whether ``body`` carries ``annotation: "true"``."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(annotation, "")).strip().lower() == "true"


def desired_of(kind: Kind, body: Mapping[str, Any]) -> DesiredGroup | DesiredTopic:
    """The resource as desired state; ``SpecError`` naming the field when it is invalid."""
    return group_from_resource(body) if kind is Kind.GROUP else topic_from_resource(body)


def object_name(kind: Kind, body: Mapping[str, Any]) -> str:
    """The group or topic name the resource claims (without validating it)."""
    spec = body.get("spec") or {}
    key = "groupName" if kind is Kind.GROUP else "topicName"
    return str(spec.get(key) or (body.get("metadata") or {}).get("name") or "")


def _status(wanted: DesiredGroup | DesiredTopic, observed: Any, todo: Any) -> ObjectStatus:
    if isinstance(wanted, DesiredGroup):
        return group_status(wanted, observed, todo)
    return topic_status(wanted, observed, todo)


def _unreachable(target: Target, exc: BaseException) -> Result:
    return Result(
        False,
        "NameServerUnreachable",
        f"name server {target.name_server}: {exc or type(exc).__name__}",
        {},
    )


async def _converge(
    admin: TopologyAdmin, wanted: DesiredGroup | DesiredTopic, target: Target
) -> Result:
    desired = (
        Desired(groups=(wanted,)) if isinstance(wanted, DesiredGroup) else Desired(topics=(wanted,))
    )
    observed = await observe(admin, desired, cluster=target.rocketmq_cluster)
    todo = plan(desired, observed)
    changes: tuple[str, ...] = ()
    if not todo.empty:
        applied = await apply(todo, admin)
        changes = tuple(a.describe() for a in applied.done)
        observed = await observe(admin, desired, cluster=target.rocketmq_cluster)
        todo = plan(desired, observed)
    status = _status(wanted, observed, todo)
    return Result(status.ready, status.reason, status.message, status.to_status(), changes)


async def reconcile(
    kind: Kind, body: Mapping[str, Any], target: Target, admin_factory: AdminFactory
) -> Result:
    """Make every broker of ``target`` match the resource; the status it ends in."""
    wanted = desired_of(kind, body)
    try:
        async with admin_factory(target.name_server) as admin:
            return await _converge(admin, wanted, target)
    except (ReconsumeError, OSError) as exc:
        return _unreachable(target, exc)


async def remove(
    kind: Kind, body: Mapping[str, Any], target: Target, admin_factory: AdminFactory
) -> Result:
    """Carry out the resource's deletion policy; ready means the resource may go (Retain, or
    everything deleted); otherwise the reason says why not (``DeletionRefused`` ...)."""
    wanted = desired_of(kind, body)
    removal = wanted.removal(force=annotated(body, FORCE_DELETE))
    if removal is None:
        return Result(True, "Retained", f"{kind} {wanted.name} is left on the brokers", {})
    desired = Desired(removals=(removal,))
    try:
        async with admin_factory(target.name_server) as admin:
            observed = await observe(admin, desired, cluster=target.rocketmq_cluster)
            todo = plan(desired, observed)
            if todo.refusals:
                reasons = "; ".join(r.reason for r in todo.refusals)
                return Result(False, "DeletionRefused", reasons, {})
            applied = await apply(todo, admin)
    except (ReconsumeError, OSError) as exc:
        return _unreachable(target, exc)
    changes = tuple(a.describe() for a in applied.done)
    if not applied.ok:
        return Result(False, "DeletionFailed", "; ".join(applied.describe()), {}, changes)
    return Result(True, "Deleted", f"{kind} {wanted.name} deleted from the brokers", {}, changes)
