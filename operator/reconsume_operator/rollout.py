"""Restarting a replicated cluster's broker pods after a template change: replicas first,
each master last and only once it can hand over.

A replicated cluster's StatefulSets update ``OnDelete``: the StatefulSet controller records
the new template's revision (``status.updateRevision``) and the operator deletes the pods
still on an older one (label ``controller-revision-hash``), one at a time across the cluster:

1. nothing is restarted while any broker pod is missing, not Ready or terminating, or while
   a StatefulSet's controller has not seen its latest spec;
2. a broker's pods are restarted only while every one of its replicas is in the Lease's in-sync
   set and it has a master (so a restarted replica is back in sync before the next pod goes,
   and Sync replication never runs out of in-sync replicas because of the rollout); a broker
   whose Lease was never held (a cluster gaining replicas: its pods do not run the election
   yet) has nothing to hand over and its pods are restarted as they come;
3. replicas before masters;
4. a master goes last; as it stops it hands its Lease to an in-sync replica (the broker's
   SIGTERM handling), so writes pause for the hand-over only, not for a whole restart.

:func:`next_step` is pure; the handler observes, deletes the pod it names and comes back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconsume_operator.masters import BrokerLease

REVISION_LABEL = "controller-revision-hash"


@dataclass(frozen=True, slots=True)
class PodView:
    name: str
    broker: int
    replica: int
    revision: str
    ready: bool
    terminating: bool
    elected: bool = True
    """Whether it runs the election (``--election``): not yet in a cluster gaining replicas."""


@dataclass(frozen=True, slots=True)
class SetView:
    replica: int
    replicas: int
    update_revision: str | None
    current: bool
    """Whether its controller has seen its latest spec (``observedGeneration``)."""


@dataclass(frozen=True, slots=True)
class Step:
    restart: str | None = None
    """The pod to delete now."""
    hand_over: bool = False
    """Whether it is a master (which hands over as it stops)."""
    waiting: str | None = None
    """Why no pod is restarted although some are outdated."""

    @property
    def done(self) -> bool:
        return self.restart is None and self.waiting is None


def outdated(sets: Mapping[int, SetView], pods: Sequence[PodView]) -> list[PodView]:
    """Pods not on their StatefulSet's latest revision, by broker then replica."""
    stale = [
        pod
        for pod in pods
        if pod.replica in sets and pod.revision != sets[pod.replica].update_revision
    ]
    return sorted(stale, key=lambda pod: (pod.broker, pod.replica))


def _unsettled(sets: Mapping[int, SetView], pods: Sequence[PodView]) -> str | None:
    for view in sets.values():
        if not view.current or view.update_revision is None:
            return f"the StatefulSet of replica {view.replica} is being updated"
    present = {(pod.broker, pod.replica) for pod in pods}
    for view in sorted(sets.values(), key=lambda v: v.replica):
        for broker in range(view.replicas):
            if (broker, view.replica) not in present:
                return f"replica {view.replica} of broker {broker} has no pod yet"
    for pod in sorted(pods, key=lambda p: (p.broker, p.replica)):
        if pod.terminating:
            return f"pod {pod.name} is stopping"
        if not pod.ready:
            return f"pod {pod.name} is not ready"
    return None


def _broker_unhealthy(
    broker: int, lease: BrokerLease | None, pods: Sequence[PodView]
) -> str | None:
    if lease is None or (lease.master is None and lease.epoch == 0):
        return None  # never elected: its pods do not run the election yet, none hands over
    if lease.master is None:
        return f"broker {broker} has no master"
    replicas = {pod.replica for pod in pods if pod.broker == broker} - {lease.master}
    behind = sorted(replicas - lease.in_sync)
    if behind:
        return f"replica {behind[0]} of broker {broker} is not in sync"
    return None


def next_step(
    sets: Mapping[int, SetView],
    pods: Sequence[PodView],
    leases: Mapping[int, BrokerLease],
) -> Step:
    """The next pod to restart (see the module's rules), or why none may be yet."""
    stale = outdated(sets, pods)
    if not stale:
        return Step()
    why = _unsettled(sets, pods)
    if why is not None:
        return Step(waiting=why)
    masters = []
    first_reason: str | None = None
    for pod in stale:
        lease = leases.get(pod.broker)
        reason = _broker_unhealthy(pod.broker, lease, pods)
        if reason is not None:
            first_reason = first_reason or reason
            continue
        if lease is None or lease.master != pod.replica:
            return Step(restart=pod.name)
        masters.append(pod)
    if masters:
        return Step(restart=masters[0].name, hand_over=True)
    return Step(waiting=first_reason or "no pod can be restarted yet")
