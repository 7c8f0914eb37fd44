"""Kopf handlers of BrokerClusters: the child objects of an operator-run cluster (owned by the
resource, so Kubernetes deletes them with it), and the status both kinds of cluster report.

Lowering ``spec.brokers`` of an operator-run cluster scales the broker StatefulSet down only
once the brokers to remove are drained (:mod:`reconsume_operator.scale_down`); until then
every other child is applied, the StatefulSet keeps its replicas, Ready is False with reason
``ScaleDownBlocked`` and the handler retries with backoff.

Passes run one at a time per object (:mod:`reconsume_operator.passes`: the status timer beside
an update could otherwise apply the StatefulSet of a spec the update has replaced), and the
StatefulSet is written only if it is still the one the replicas were decided from (its
``resourceVersion`` is the server-side apply's precondition): a pass that decided from an
older StatefulSet, in this operator or in another one acting at the same time, gets a conflict
and retries, and never scales down brokers whose drain it did not observe.

Each new reason of ``Ready=False`` (``NameServerUnreachable``, ``ChildrenFailed``,
``ScaleDownBlocked``, ``NoBrokers``, ``BrokersMissing``) is posted as a Warning Event once, and
the return to ``Running`` as a Normal one. ``status.firstReadyTime`` records when the cluster
was first Ready.

The index ``broker_clusters`` tells the ConsumerGroup and Topic handlers where a cluster's
name servers are, whether it was ever Ready and whether it is being deleted, without an API
request per reconcile.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from reconsume.errors import ReconsumeError
from reconsume.topology.clusters import ClusterSpec, cluster_spec
from reconsume.topology.resources import Target
from reconsume_operator.access_sync import access_status, prepare_cluster
from reconsume_operator.broker_pods import leases
from reconsume_operator.children import children
from reconsume_operator.clusters import observe_cluster, operator_address
from reconsume_operator.conditions import READY, Condition, now_text, ready_of
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.credentials import CredentialsProblem
from reconsume_operator.events import Warnings, normal
from reconsume_operator.kube import KubeError
from reconsume_operator.master_services import (
    SLICE_KIND,
    address_type,
    ensure_slice,
    is_master_service,
    master_slices,
)
from reconsume_operator.master_status import register_master_status
from reconsume_operator.masters import masters_column, with_masters
from reconsume_operator.metrics import reconcile_timer
from reconsume_operator.naming import broker_name
from reconsume_operator.network_policy import operator_peer
from reconsume_operator.passes import ObjectLocks, deleting
from reconsume_operator.replicated import (
    BrokerPods,
    observe,
    prune,
    replicas_gated,
    roll,
    stop_rolling_updates,
)
from reconsume_operator.rollout import Step
from reconsume_operator.scale_down import (
    BLOCKED,
    ScaleDecision,
    observe_drain,
    removed_brokers,
    scale_decision,
    unobservable,
)
from reconsume_operator.status import status_patch

PLURAL = "brokerclusters"
LABEL = "BrokerCluster"
FIRST_READY = "firstReadyTime"
ROLLOUT_RECHECK_S = 2.0
"""Seconds between passes while a replicated cluster's pods are restarted one by one."""


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """What the ConsumerGroup and Topic handlers know of a BrokerCluster: where its name
    servers are, whether it was ever Ready (a group of a cluster that never was has nothing on
    any broker), and whether it is being deleted (an operator-run cluster's brokers then go
    with it)."""

    target: Target
    ever_ready: bool
    deleting: bool
    external: bool
    spec: ClusterSpec | None = None


def ever_ready(body: Mapping[str, Any]) -> bool:
    """Whether the cluster's status says it was Ready once (or is now)."""
    status = body.get("status") or {}
    ready = ready_of(status.get("conditions"))
    return bool(status.get(FIRST_READY)) or (ready is not None and ready.get("status") == "True")


def register_clusters(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    template = ctx.config.name_server_template
    operator = operator_peer(ctx.config.pod_namespace, ctx.config.pod_labels)
    passes = ObjectLocks()
    warnings = Warnings()

    @kopf.index(GROUP, VERSION, PLURAL, registry=registry, id="broker_clusters")
    def broker_clusters(body: kopf.Body, **_: Any) -> dict[tuple[str, str], ClusterRef]:
        spec = cluster_spec(body, ctx.config.image)
        address = operator_address(spec, template)
        target = Target(address, spec.rocketmq_cluster)
        ref = ClusterRef(target, ever_ready(body), deleting(body), spec.external, spec)
        return {(spec.namespace, spec.name): ref}

    async def decide_replicas(spec: ClusterSpec) -> tuple[ScaleDecision, str | None]:
        """The broker StatefulSet's replicas: ``spec.brokers``, or its current replicas while
        the brokers a scale-down removes are not drained; and the ``resourceVersion`` of the
        StatefulSet that was decided from (None: none exists)."""
        if spec.external:
            return ScaleDecision(spec.brokers), None
        current_sts = await asyncio.to_thread(
            ctx.writer.get, "apps/v1", "StatefulSet", spec.namespace, broker_name(spec.name)
        )
        current = None if current_sts is None else (current_sts.get("spec") or {}).get("replicas")
        version = None if current_sts is None else current_sts["metadata"].get("resourceVersion")
        removed = removed_brokers(spec.name, current, spec.brokers)
        if not removed:
            return ScaleDecision(spec.brokers), version
        address = operator_address(spec, template)
        try:
            async with ctx.admin(address) as admin:
                drains = await observe_drain(admin, spec.rocketmq_cluster, removed)
        except (ReconsumeError, OSError) as exc:
            error = f"name server {address} did not answer: {exc or type(exc).__name__}"
            drains = unobservable(removed, error)
        return scale_decision(spec.name, current, spec.brokers, drains), version

    async def reconcile_cluster(
        body: kopf.Body, patch: kopf.Patch, retry: int = 0, **_: Any
    ) -> None:
        async with passes.hold(body):
            if deleting(body):
                return  # its children go with it (owner references)
            await reconcile_pass(body, patch, retry)

    async def reconcile_pass(body: kopf.Body, patch: kopf.Patch, retry: int) -> None:
        with reconcile_timer(LABEL) as outcome:
            spec = cluster_spec(body, ctx.config.image)
            generation = body.meta.get("generation")
            try:
                pods = await observe(ctx.writer, spec) if spec.replicated else BrokerPods()
                replica_pods = 0 if replicas_gated(spec, pods) else None
                await stop_rolling_updates(ctx.writer, spec, pods)  # before it is read below
                acl = await prepare_cluster(ctx, spec, body, operator_address(spec, template))
                decision, version = await decide_replicas(spec)
                if decision.removing:
                    normal(body, "ScalingDown", decision.message)
                objects = children(spec, decision.replicas, replica_pods, operator)
                brokers = max(spec.brokers, decision.replicas)
                placeholders = [*leases(spec, decision.replicas), *master_slices(spec, brokers)]
                kopf.adopt([*objects, *placeholders], owner=body)
                families = {}
                for service in filter(is_master_service, objects):  # their slices' family
                    applied = await asyncio.to_thread(ctx.writer.apply, service)
                    families[service["metadata"]["name"]] = address_type(applied)
                for placeholder in placeholders:  # before the pods that use them
                    if placeholder["kind"] == SLICE_KIND:
                        placeholder["addressType"] = families[placeholder["metadata"]["name"]]
                        await asyncio.to_thread(ensure_slice, ctx.writer, placeholder)
                    else:
                        await asyncio.to_thread(ctx.writer.create_missing, placeholder)
                for obj in itertools.filterfalse(is_master_service, objects):
                    first_set = obj["metadata"]["name"] == broker_name(spec.name)
                    if obj["kind"] == "StatefulSet" and first_set and version is not None:
                        # Written only if unchanged since the replicas were decided.
                        obj["metadata"]["resourceVersion"] = version
                    await asyncio.to_thread(ctx.writer.apply, obj)
                if not spec.external:
                    owner = str(body.meta.get("uid"))
                    wanted = [*objects, *placeholders]
                    for gone in await prune(ctx.writer, spec, owner, wanted):
                        normal(body, "Deleted", f"deleted {gone}: no longer in the spec")
                if spec.replicated:
                    pods = await observe(ctx.writer, spec)
                step = await roll(ctx.writer, spec, pods) if spec.replicated else Step()
            except (KubeError, CredentialsProblem) as exc:
                reason = "ChildrenFailed" if isinstance(exc, KubeError) else "AccessControlFailed"
                condition = Condition(READY, False, reason, str(exc))
                warnings.post(body, condition.reason, condition.message)
                patch.status.update(
                    status_patch(body.get("status"), generation, utc_now(), [condition])
                )
                raise kopf.TemporaryError(str(exc), delay=ctx.backoff_s(retry)) from exc
            if step.restart is not None:
                what = "its master, which hands over" if step.hand_over else "a replica"
                normal(body, "RestartingBroker", f"restarting pod {step.restart} ({what})")
            observed = await observe_cluster(spec, ctx.admin, operator_address(spec, template))
            condition = Condition(READY, observed.ready, observed.reason, observed.message)
            if decision.blocked:
                condition = Condition(READY, False, BLOCKED, decision.message)
            fields: dict[str, Any] = {"phase": observed.phase, **observed.fields}
            fields["accessControl"] = access_status(spec, acl)
            if "brokers" in fields and not spec.external:
                fields["brokers"] = with_masters(spec, fields["brokers"], pods.leases)
                fields["masters"] = masters_column(fields["brokers"])
            if condition.status:
                if warnings.settled(body, condition.reason):
                    normal(body, condition.reason, condition.message)
                first = (body.get("status") or {}).get(FIRST_READY)
                fields[FIRST_READY] = first or now_text(utc_now())
            else:
                warnings.post(body, condition.reason, condition.message)
            patch.status.update(
                status_patch(body.get("status"), generation, utc_now(), [condition], fields)
            )
            if decision.blocked:
                outcome.result = "refused"
                raise kopf.TemporaryError(decision.message, delay=ctx.backoff_s(retry))
            if not step.done:
                # A rollout under way: come back soon to restart its next pod.
                outcome.result = "pending"
                raise kopf.TemporaryError(
                    step.waiting or f"restarting pod {step.restart}", delay=ROLLOUT_RECHECK_S
                )
            outcome.result = "ok" if observed.ready else "pending"

    kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="cluster-create")(
        reconcile_cluster
    )
    kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="cluster-update")(
        reconcile_cluster
    )
    kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="cluster-resume")(
        reconcile_cluster
    )
    register_master_status(registry, ctx, passes)
    kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        registry=registry,
        id="cluster-status",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )(reconcile_cluster)
