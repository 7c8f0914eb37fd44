"""The masters in a BrokerCluster's status as its brokers' Leases change.

The status's ``brokers[].master``, ``epoch`` and ``inSync`` and the ``MASTERS`` column come
from the Leases (:mod:`reconsume_operator.masters`) at every pass of the cluster, which the
drift timer runs once a minute by default: after a failover ``kubectl get rbc`` named the old
master for up to that long. A watch of the brokers' Leases brings the lease's broker entry
up to date as soon as its holder, epoch or in-sync replicas change (not at each renewal:
those change only ``renewTime``). It changes only entries a pass has written (a broker the
name servers have not reported yet has none), under the cluster's pass lock, so a pass and
it never write the status at the same time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from reconsume.topology.clusters import cluster_spec
from reconsume_operator.context import GROUP, VERSION, OperatorContext
from reconsume_operator.kube import KubeError
from reconsume_operator.masters import BrokerLease, broker_lease, masters_column, with_masters
from reconsume_operator.passes import ObjectLocks, deleting

KIND = "BrokerCluster"
Logger = logging.Logger | logging.LoggerAdapter[Any]
INSTANCE_LABEL = "app.kubernetes.io/instance"
LEASE_LABELS: dict[str, str] = {
    "app.kubernetes.io/component": "broker-lease",
    "app.kubernetes.io/managed-by": "reconsume-operator",
}


def lease_state(lease: BrokerLease) -> tuple[int | None, int, frozenset[int]]:
    """What the status shows of a lease: its holder, epoch and in-sync replicas."""
    return lease.master, lease.epoch, lease.in_sync


def owner_uid(body: Mapping[str, Any]) -> str | None:
    """The uid of the BrokerCluster that owns the lease (None: none does)."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("uid"):
            return str(ref["uid"])
    return None


def updated_status(
    cluster: Mapping[str, Any], image: str, lease: BrokerLease
) -> dict[str, Any] | None:
    """The status fields that bring ``cluster``'s entry of ``lease``'s broker up to date
    (None: nothing to change, or nothing a pass has written to change)."""
    status = cluster.get("status") or {}
    brokers = status.get("brokers")
    if not brokers or deleting(cluster):
        return None
    spec = cluster_spec(dict(cluster), image)
    if not spec.replicated or spec.external:
        return None
    updated = with_masters(spec, brokers, {lease.broker: lease})
    if updated == brokers:
        return None
    return {"brokers": updated, "masters": masters_column(updated)}


def register_master_status(
    registry: kopf.OperatorRegistry, ctx: OperatorContext, passes: ObjectLocks
) -> None:
    """Watch the brokers' Leases; ``passes``: the clusters' pass locks."""
    shown: dict[tuple[str, str], tuple[int | None, int, frozenset[int]]] = {}
    """Per lease (namespace, name): what the status was last brought to, by this watch."""

    @kopf.on.event(
        "coordination.k8s.io",
        "v1",
        "leases",
        labels=LEASE_LABELS,
        registry=registry,
        id="broker-lease-masters",
    )
    async def lease_changed(
        body: kopf.Body, event: kopf.RawEvent, logger: Logger, **_: Any
    ) -> None:
        namespace, name = body.meta.namespace or "", body.meta.name or ""
        if event.get("type") == "DELETED":
            shown.pop((namespace, name), None)
            return
        cluster_name = body.meta.labels.get(INSTANCE_LABEL)
        owner = owner_uid(body)
        lease = broker_lease(cluster_name or "", body)
        if cluster_name is None or owner is None or lease is None:
            return
        state = lease_state(lease)
        if shown.get((namespace, name)) == state:
            return  # a renewal
        async with passes.hold({"metadata": {"uid": owner}}):
            try:
                cluster = await asyncio.to_thread(
                    ctx.writer.get, f"{GROUP}/{VERSION}", KIND, namespace, cluster_name
                )
                if cluster is None:
                    return
                patch = updated_status(cluster, ctx.config.image, lease)
                if patch is not None:
                    await asyncio.to_thread(
                        ctx.writer.patch_status,
                        f"{GROUP}/{VERSION}",
                        KIND,
                        namespace,
                        cluster_name,
                        patch,
                    )
            except (KubeError, ValueError) as exc:
                logger.warning(f"status of {cluster_name} not brought up to date: {exc}")
                return
        shown[(namespace, name)] = state
