"""What the BrokerCluster handler observes and does beyond applying its children: the brokers'
StatefulSets, pods and Leases as they are; the Leases created; objects the spec no longer asks
for deleted; and, for replicated clusters, the next pod of a rollout restarted
(:mod:`reconsume_operator.rollout`).

Every list is by the cluster's labels in its namespace, and nothing is deleted unless the
BrokerCluster owns it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.broker_pods import LEASE_API
from reconsume_operator.kube import ChildWriter
from reconsume_operator.master_services import DISCOVERY_API
from reconsume_operator.masters import BrokerLease, broker_leases
from reconsume_operator.naming import POD_INDEX_LABEL, broker_name, replica_set_name
from reconsume_operator.network_policy import API_VERSION as NETWORK_API
from reconsume_operator.rollout import REVISION_LABEL, PodView, SetView, Step, next_step

PRUNED = (
    ("apps/v1", "StatefulSet"),
    ("policy/v1", "PodDisruptionBudget"),
    (LEASE_API, "Lease"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("v1", "ServiceAccount"),
    (NETWORK_API, "NetworkPolicy"),
    ("v1", "Service"),
    (DISCOVERY_API, "EndpointSlice"),
)
"""Kinds of children that a spec change can make unwanted (fewer replicas or brokers,
``spec.networkPolicy.enabled`` turned off; the master Services and slices of a cluster that
has no replicas any more)."""


@dataclass(frozen=True, slots=True)
class BrokerPods:
    """A cluster's broker StatefulSets, pods and Leases as last listed."""

    sets: dict[int, SetView] = field(default_factory=dict)
    set_bodies: dict[int, dict[str, Any]] = field(default_factory=dict)
    pods: list[PodView] = field(default_factory=list)
    leases: dict[int, BrokerLease] = field(default_factory=dict)


def cluster_selector(cluster: str, component: str | None = None) -> str:
    selector = (
        f"app.kubernetes.io/instance={cluster},app.kubernetes.io/managed-by=reconsume-operator"
    )
    return selector if component is None else f"{selector},app.kubernetes.io/component={component}"


def replica_of(cluster: str, set_name: str) -> int | None:
    """The replica a broker StatefulSet (or pod, without its ordinal) runs; None: not one."""
    first = broker_name(cluster)
    if set_name == first:
        return 0
    suffix = set_name.removeprefix(f"{first}-r")
    return int(suffix) if suffix != set_name and suffix.isdigit() else None


def set_view(cluster: str, body: Mapping[str, Any]) -> SetView | None:
    metadata = body.get("metadata") or {}
    replica = replica_of(cluster, str(metadata.get("name", "")))
    if replica is None:
        return None
    status = body.get("status") or {}
    generation = metadata.get("generation") or 0
    return SetView(
        replica=replica,
        replicas=int((body.get("spec") or {}).get("replicas") or 0),
        update_revision=status.get("updateRevision"),
        current=(status.get("observedGeneration") or 0) >= generation,
    )


def pod_view(cluster: str, body: Mapping[str, Any]) -> PodView | None:
    metadata = body.get("metadata") or {}
    name = str(metadata.get("name", ""))
    labels = metadata.get("labels") or {}
    set_name, _sep, ordinal = name.rpartition("-")
    replica = replica_of(cluster, set_name)
    index = labels.get(POD_INDEX_LABEL, ordinal)
    if replica is None or not str(index).isdigit():
        return None
    conditions = (body.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    containers = (body.get("spec") or {}).get("containers") or []
    return PodView(
        name=name,
        broker=int(index),
        replica=replica,
        revision=str(labels.get(REVISION_LABEL, "")),
        ready=ready,
        terminating=bool(metadata.get("deletionTimestamp")),
        elected=any("--election" in (c.get("args") or []) for c in containers),
    )


async def observe(writer: ChildWriter, spec: ClusterSpec) -> BrokerPods:
    """The cluster's broker StatefulSets, pods and (replicated) Leases."""
    brokers = cluster_selector(spec.name, "broker")
    ns = spec.namespace
    bodies = await asyncio.to_thread(writer.list, "apps/v1", "StatefulSet", ns, brokers)
    pods = await asyncio.to_thread(writer.list, "v1", "Pod", ns, brokers)
    leases: list[dict[str, Any]] = []
    if spec.replicated:
        sel = cluster_selector(spec.name, "broker-lease")
        leases = await asyncio.to_thread(writer.list, LEASE_API, "Lease", ns, sel)
    sets: dict[int, SetView] = {}
    set_bodies: dict[int, dict[str, Any]] = {}
    for body in bodies:
        view = set_view(spec.name, body)
        if view is not None:
            sets[view.replica] = view
            set_bodies[view.replica] = body
    views = [pod_view(spec.name, body) for body in pods]
    return BrokerPods(
        sets=sets,
        set_bodies=set_bodies,
        pods=[view for view in views if view is not None],
        leases=broker_leases(spec.name, leases),
    )


async def stop_rolling_updates(
    writer: ChildWriter, spec: ClusterSpec, observed: BrokerPods
) -> None:
    """Switch the first StatefulSet of a cluster that gains replicas to ``OnDelete``. Applying
    the new strategy alone is refused: the API server keeps the ``rollingUpdate`` it defaulted
    when the StatefulSet was created, which only ``RollingUpdate`` allows; a merge patch
    removes it."""
    first = observed.set_bodies.get(0)
    if not spec.replicated or first is None:
        return
    strategy = (first.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type") == "OnDelete":
        return
    patch = {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}
    name = replica_set_name(spec.name, 0)
    await asyncio.to_thread(
        writer.merge_patch, "apps/v1", "StatefulSet", spec.namespace, name, patch
    )


def replicas_gated(spec: ClusterSpec, observed: BrokerPods) -> bool:
    """Whether the replica StatefulSets must stay without pods for now: the cluster had no
    replicas and its first pods do not all run the election yet (judged by the pods
    themselves, not by the StatefulSet's revisions, which lag behind a change). A replica
    started beside them would find no master in the Lease and could take it with an empty
    store."""
    if not spec.replicated or 0 not in observed.sets:
        return False
    if any(view.replicas > 0 for replica, view in observed.sets.items() if replica > 0):
        return False
    first_pods = [pod for pod in observed.pods if pod.replica == 0]
    return len(first_pods) < observed.sets[0].replicas or not all(
        pod.elected and pod.ready and not pod.terminating for pod in first_pods
    )


async def prune(
    writer: ChildWriter, spec: ClusterSpec, owner_uid: str, wanted: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Delete the cluster's children of :data:`PRUNED` kinds that ``wanted`` does not hold;
    the ``<Kind>/<name>`` deleted."""
    keep = {(obj["kind"], obj["metadata"]["name"]) for obj in wanted}
    deleted: list[str] = []
    for api, kind in PRUNED:
        sel = cluster_selector(spec.name)
        found = await asyncio.to_thread(writer.list, api, kind, spec.namespace, sel)
        for body in found:
            metadata = body.get("metadata") or {}
            name = str(metadata.get("name", ""))
            owners = metadata.get("ownerReferences") or []
            if (kind, name) in keep or not any(o.get("uid") == owner_uid for o in owners):
                continue
            uid = metadata.get("uid")
            gone = await asyncio.to_thread(writer.delete, api, kind, spec.namespace, name, uid)
            if gone:
                deleted.append(f"{kind}/{name}")
    return deleted


async def roll(writer: ChildWriter, spec: ClusterSpec, observed: BrokerPods) -> Step:
    """Restart the next pod of a rollout, if one may be; the step taken."""
    wanted = {replica for replica in observed.sets if replica < spec.replicas}
    sets = {replica: view for replica, view in observed.sets.items() if replica in wanted}
    step = next_step(sets, observed.pods, observed.leases)
    if step.restart is not None:
        await asyncio.to_thread(writer.delete, "v1", "Pod", spec.namespace, step.restart)
    return step
