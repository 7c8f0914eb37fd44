"""Which pod is each broker's master, read from the brokers' Leases.

A replicated broker's Lease (named as the broker; written by its pods, see the broker's
``reconsume.broker.kube_lease``) holds the master's identity ``<broker name>-<broker id>`` in
``spec.holderIdentity``, its epoch in ``spec.leaseTransitions`` and the in-sync replicas'
identities in the ``reconsume.io/in-sync`` annotation; broker id R is the pod of replica R
(:func:`reconsume_operator.naming.pod_name`). The format is the broker's: a unit test checks
the two agree, since the operator does not import the broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.naming import broker_name, pod_name

IN_SYNC_ANNOTATION = "reconsume.io/in-sync"


@dataclass(frozen=True, slots=True)
class BrokerLease:
    """One broker's Lease as the operator reads it."""

    broker: int
    """The broker's index (its pods' ordinal)."""
    master: int | None
    """The replica (broker id) holding the lease; None: nobody does (a failover or a
    hand-over is under way, or the broker never started)."""
    epoch: int = 0
    in_sync: frozenset[int] = field(default_factory=frozenset)
    """Replicas that hold every acknowledged write."""


def _replica_of(identity: str, broker: str) -> int | None:
    prefix = f"{broker}-"
    if not identity.startswith(prefix) or not identity[len(prefix) :].isdigit():
        return None
    return int(identity[len(prefix) :])


def broker_lease(cluster: str, lease: Mapping[str, Any]) -> BrokerLease | None:
    """``lease`` as a :class:`BrokerLease` of ``cluster`` (None: not one of its brokers')."""
    name = str((lease.get("metadata") or {}).get("name", ""))
    prefix = f"{broker_name(cluster)}-"
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        return None
    spec = lease.get("spec") or {}
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    holder = spec.get("holderIdentity")
    in_sync = {
        _replica_of(member.strip(), name)
        for member in str(annotations.get(IN_SYNC_ANNOTATION, "")).split(",")
    }
    return BrokerLease(
        broker=int(name[len(prefix) :]),
        master=None if not holder else _replica_of(str(holder), name),
        epoch=int(spec.get("leaseTransitions") or 0),
        in_sync=frozenset(replica for replica in in_sync if replica is not None),
    )


def broker_leases(cluster: str, leases: Iterable[Mapping[str, Any]]) -> dict[int, BrokerLease]:
    """By broker index, the leases of ``cluster``'s brokers among ``leases``."""
    found = (broker_lease(cluster, lease) for lease in leases)
    return {lease.broker: lease for lease in found if lease is not None}


def master_fields(cluster: str, lease: BrokerLease | None, broker: int) -> dict[str, Any]:
    """What ``status.brokers[]`` says of broker ``broker``'s master: the pod, epoch, in-sync
    replicas' pods (``lease`` None: an unreplicated broker, its own only pod)."""
    if lease is None:
        return {"master": pod_name(cluster, broker, 0)}
    fields: dict[str, Any] = {"epoch": lease.epoch}
    if lease.master is not None:
        fields["master"] = pod_name(cluster, broker, lease.master)
    fields["inSync"] = [pod_name(cluster, broker, replica) for replica in sorted(lease.in_sync)]
    return fields


def with_masters(
    spec: ClusterSpec, brokers: Sequence[Mapping[str, Any]], leases: Mapping[int, BrokerLease]
) -> list[dict[str, Any]]:
    """``status.brokers`` entries with their master's fields (entries of brokers not named
    as this cluster's are kept as they are)."""
    prefix = f"{broker_name(spec.name)}-"
    entries = []
    for entry in brokers:
        name = str(entry.get("name", ""))
        index = name[len(prefix) :] if name.startswith(prefix) else ""
        if not index.isdigit():
            entries.append(dict(entry))
            continue
        lease = leases.get(int(index)) if spec.replicated else None
        if spec.replicated and lease is None:
            entries.append(dict(entry))
            continue
        entries.append({**entry, **master_fields(spec.name, lease, int(index))})
    return entries


def masters_column(brokers: Sequence[Mapping[str, Any]]) -> str:
    """``status.masters``: each broker's master pod in broker order, comma-separated (``-``
    where none holds the lease), for the ``MASTERS`` column. A printer column's JSONPath over
    ``status.brokers[*]`` shows only the first broker's."""
    return ",".join(str(entry.get("master") or "-") for entry in brokers)
