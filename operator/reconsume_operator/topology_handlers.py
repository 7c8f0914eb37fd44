"""Kopf handlers of ConsumerGroups and Topics: thin wrappers around
:mod:`reconsume.topology.resources` that write status, conditions and events, one pass per
object at a time.

Create, update, resume and a drift timer all reconcile; deletion (behind the operator's
finalizer) carries out ``deletionPolicy``. A failure leaves ``Ready=False`` with the reason,
posts it as a Warning Event when it is a new reason, and raises ``kopf.TemporaryError`` with a
bounded, doubling delay; Kopf handles every object in its own worker, so one object waiting
does not hold up the others (deletions included).

The annotations act at once, not at the next retry: the handlers of a paused object, of a
force-deleted one and of the others are separate Kopf handlers selected by the annotations
(``when``), and Kopf sets aside the state of a handler that no longer matches, delayed retry
included, so adding the annotation runs the matching handler on its watch event.

A deletion always ends in a bounded time: it is released without touching the brokers when
the BrokerCluster does not exist, never became Ready, or is an operator-run cluster being
deleted (its brokers go with it); when its name servers do not answer and force-delete is set;
and when they have not answered for ``deletion_timeout_s`` since the deletion began. Each
release that leaves something on brokers says so in a Warning Event ``LeftOnBrokers``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import kopf

from reconsume.topology import Kind, SpecError
from reconsume.topology.resources import (
    FORCE_DELETE,
    PAUSED,
    annotated,
    object_name,
    reconcile,
    remove,
)
from reconsume_operator import status as statuses
from reconsume_operator.access_sync import ensure_credentials, names_users, sync_cluster
from reconsume_operator.cluster_handlers import ClusterRef
from reconsume_operator.conditions import READY, Condition
from reconsume_operator.conflicts import Claim, claim_key, claim_of, conflicting_owner
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.credentials import CredentialsProblem
from reconsume_operator.events import Warnings, normal
from reconsume_operator.kube import KubeError
from reconsume_operator.metrics import Outcome, reconcile_timer
from reconsume_operator.passes import ObjectLocks, deleting

PLURALS = {Kind.GROUP: "consumergroups", Kind.TOPIC: "topics"}
KINDS = {Kind.GROUP: "ConsumerGroup", Kind.TOPIC: "Topic"}
CLUSTERS_INDEX = "broker_clusters"
CLAIMS_INDEX = {Kind.GROUP: "group_claims", Kind.TOPIC: "topic_claims"}
UNREACHABLE = "NameServerUnreachable"
DELETION_WAITING = "DeletionWaiting"
LEFT_ON_BROKERS = "LeftOnBrokers"


def _cluster_of(body: Mapping[str, Any]) -> str:
    return str((body.get("spec") or {}).get("cluster") or "")


def _cluster(
    index: kopf.Index[tuple[str, str], ClusterRef], namespace: str, cluster: str
) -> ClusterRef | None:
    store = index.get((namespace, cluster))
    return None if store is None else next(iter(store), None)


def _paused(body: kopf.Body, **_: Any) -> bool:
    return annotated(body, PAUSED)


def _active(body: kopf.Body, **_: Any) -> bool:
    return not annotated(body, PAUSED)


def _forced(body: kopf.Body, **_: Any) -> bool:
    return annotated(body, FORCE_DELETE) and not annotated(body, PAUSED)


def _unforced(body: kopf.Body, **_: Any) -> bool:
    return not annotated(body, FORCE_DELETE) and not annotated(body, PAUSED)


def deletion_age_s(body: Mapping[str, Any], now: datetime) -> float:
    """Seconds since the object's deletion began (0 when unknown)."""
    stamp = (body.get("metadata") or {}).get("deletionTimestamp")
    if not stamp:
        return 0.0
    try:
        began = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (now - began).total_seconds())


def release_reason(
    ref: ClusterRef, *, forced: bool, waited_s: float, timeout_s: float
) -> str | None:
    """Why a deletion whose name servers do not answer may end without them; None: wait."""
    if forced:
        return 'it is annotated reconsume.io/force-delete: "true"'
    if not ref.ever_ready:
        return "its BrokerCluster never became Ready"
    if waited_s >= timeout_s:
        return f"they have not answered for {waited_s:.0f} s (deletion timeout {timeout_s:.0f} s)"
    return None


@dataclass
class Pass:
    """One handler call on a ConsumerGroup or Topic: what Kopf gave it, the generation it read
    when it began, and the result label of its reconcile metric."""

    body: kopf.Body
    patch: kopf.Patch
    namespace: str
    logger: logging.Logger | logging.LoggerAdapter[Any]
    retry: int
    indexes: Mapping[str, Any]
    generation: int | None
    outcome: Outcome

    def write(self, conditions: list[Condition], fields: Mapping[str, Any] | None = None) -> None:
        """The status of this pass, at the generation it began with: a timer's body is live, so
        the generation it holds at the end may be newer than the spec the pass applied."""
        document = statuses.status_patch(
            self.body.get("status"), self.generation, utc_now(), conditions, fields
        )
        for key, value in document.items():
            self.patch.status[key] = value


Work = Callable[[Pass], Awaitable[None]]


def register_topology(registry: kopf.OperatorRegistry, ctx: OperatorContext, kind: Kind) -> None:
    """Register the handlers of ``kind`` (groups or topics) in ``registry``."""
    plural = PLURALS[kind]
    label = KINDS[kind]

    @kopf.index(GROUP, VERSION, plural, registry=registry, id=CLAIMS_INDEX[kind])
    def claims(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Claim]:
        key = claim_key(namespace or "", _cluster_of(body), str(kind), object_name(kind, body))
        return {key: claim_of(body)}

    passes = ObjectLocks()
    warnings = Warnings()

    def handler(work: Work, *, deletion: bool = False) -> Callable[..., Awaitable[None]]:
        """``work`` as a Kopf handler, one pass per object at a time (``passes.py``): Kopf runs
        the drift timer beside the other handlers, and the deletion handler while a drift pass
        may still be applying the spec. Unless it is the ``deletion``, a pass that got the
        object after its deletion began does nothing."""

        async def handle(
            body: kopf.Body,
            patch: kopf.Patch,
            namespace: str | None,
            logger: logging.Logger | logging.LoggerAdapter[Any],
            retry: int = 0,
            **kwargs: Any,
        ) -> None:
            async with passes.hold(body):
                if deleting(body) and not deletion:
                    return
                with reconcile_timer(label) as outcome:
                    generation = body.meta.get("generation")
                    ns = namespace or ""
                    await work(Pass(body, patch, ns, logger, retry, kwargs, generation, outcome))

        return handle

    async def secure(p: Pass, ref: ClusterRef, cluster: str) -> str | None:
        """Load the cluster's credentials, and render its ACL again when this object grants
        (or granted) Users anything; the problem, or None."""
        old = p.indexes.get("old") or {}  # Kopf's keyword arguments: an update's old body
        try:
            if ref.spec is not None:
                await ensure_credentials(ctx, ref.spec, ref.target.name_server)
            if names_users(p.body.get("spec")) or names_users(old.get("spec")):
                await sync_cluster(ctx, p.namespace, cluster)
        except (KubeError, CredentialsProblem) as exc:
            return f"access control of BrokerCluster {cluster}: {exc}"
        return None

    async def reconcile_pass(p: Pass) -> None:
        body, ns, outcome = p.body, p.namespace, p.outcome
        if annotated(body, PAUSED):
            p.write(statuses.paused())
            outcome.result = "paused"
            return
        cluster = _cluster_of(body)
        name = object_name(kind, body)
        all_claims: kopf.Index[Any, Claim] = p.indexes[CLAIMS_INDEX[kind]]
        others = all_claims.get(claim_key(ns, cluster, str(kind), name)) or ()
        owner = conflicting_owner(claim_of(body), others)
        if owner is not None:
            p.write(statuses.conflict(str(kind), name, cluster, owner.resource))
            outcome.result = "conflict"
            p.logger.warning(f"{kind} {name} belongs to the older {label} {owner.resource}")
            return
        ref = _cluster(p.indexes[CLUSTERS_INDEX], ns, cluster)
        if ref is None:
            message = f"BrokerCluster {cluster} does not exist in namespace {ns}"
            warnings.post(body, "ClusterNotFound", message)
            p.write(statuses.reconciled(False, "ClusterNotFound", message))
            raise kopf.TemporaryError(message, delay=ctx.backoff_s(p.retry))
        if (problem := await secure(p, ref, cluster)) is not None:
            warnings.post(body, "AccessControlFailed", problem)
            p.write(statuses.reconciled(False, "AccessControlFailed", problem))
            raise kopf.TemporaryError(problem, delay=ctx.backoff_s(p.retry))
        try:
            result = await reconcile(kind, body, ref.target, ctx.admin)
        except SpecError as exc:
            warnings.post(body, "InvalidSpec", str(exc))
            p.write(statuses.reconciled(False, "InvalidSpec", str(exc)))
            outcome.result = "invalid"
            raise kopf.PermanentError(str(exc)) from exc
        fields = (
            statuses.group_fields(result.status, utc_now())
            if kind is Kind.GROUP
            else dict(result.status)
        )
        p.write(statuses.reconciled(result.ready, result.reason, result.message), fields)
        if result.changes:
            normal(body, "Configured", "; ".join(result.changes))
        if not result.ready:
            warnings.post(body, result.reason, result.message)
            raise kopf.TemporaryError(
                f"{result.reason}: {result.message}", delay=ctx.backoff_s(p.retry)
            )
        warnings.settled(body, result.reason)
        outcome.result = "ok"

    async def paused_pass(p: Pass) -> None:
        p.write(statuses.paused())
        p.outcome.result = "paused"

    async def delete_pass(p: Pass) -> None:
        body, ns, outcome = p.body, p.namespace, p.outcome
        cluster = _cluster_of(body)
        name = object_name(kind, body)
        if annotated(body, PAUSED):
            p.logger.info(f"paused: {kind} {name} is left on the brokers")
            warnings.forget(body)
            outcome.result = "paused"
            return
        all_claims: kopf.Index[Any, Claim] = p.indexes[CLAIMS_INDEX[kind]]
        others = all_claims.get(claim_key(ns, cluster, str(kind), name)) or ()
        if conflicting_owner(claim_of(body), others) is not None:
            warnings.forget(body)
            outcome.result = "conflict"  # not ours to delete
            return
        ref = _cluster(p.indexes[CLUSTERS_INDEX], ns, cluster)
        if ref is None or (ref.deleting and not ref.external):
            gone = "does not exist" if ref is None else "is being deleted with its brokers"
            message = f"BrokerCluster {cluster} {gone}: {kind} {name} deleted from no broker"
            p.logger.info(message)
            normal(body, "Released", message)
            warnings.forget(body)
            outcome.result = "ok"
            return
        if (problem := await secure(p, ref, cluster)) is not None:
            p.write([Condition(READY, False, "AccessControlFailed", problem)])
            raise kopf.TemporaryError(problem, delay=ctx.backoff_s(p.retry))
        try:
            result = await remove(kind, body, ref.target, ctx.admin)
        except SpecError as exc:
            p.logger.warning(f"invalid spec, nothing deleted from the brokers: {exc}")
            warnings.forget(body)
            outcome.result = "invalid"
            return
        if result.changes:
            normal(body, "Deleted", "; ".join(result.changes))
        if result.ready:
            warnings.forget(body)
            outcome.result = "ok"
            return
        reason, message, delay = result.reason, result.message, ctx.backoff_s(p.retry)
        if reason == UNREACHABLE:
            waited = deletion_age_s(body, utc_now())
            timeout = ctx.config.deletion_timeout_s
            why = release_reason(
                ref, forced=annotated(body, FORCE_DELETE), waited_s=waited, timeout_s=timeout
            )
            if why is not None:
                left = (
                    f"{kind} {name} was not deleted from the brokers of BrokerCluster "
                    f"{cluster}: its name servers do not answer and {why} ({message})"
                )
                p.write([Condition(READY, False, LEFT_ON_BROKERS, left)])
                warnings.post(body, LEFT_ON_BROKERS, left)
                warnings.forget(body)
                p.logger.warning(left)
                outcome.result = "abandoned"
                return
            remaining = timeout - waited
            reason = DELETION_WAITING
            message = (
                f"{message}; waiting for them, at most {remaining:.0f} s more, then {kind} "
                f'{name} is left on the brokers (annotate reconsume.io/force-delete: "true" '
                "to stop waiting)"
            )
            delay = max(1.0, min(delay, remaining))
        p.write([Condition(READY, False, reason, message)])
        warnings.post(body, reason, message)
        outcome.result = "refused" if reason == "DeletionRefused" else "error"
        raise kopf.TemporaryError(f"{reason}: {message}", delay=delay)

    reconcile_handler = handler(reconcile_pass)
    paused_handler = handler(paused_pass)
    for cause, decorator in (
        ("create", kopf.on.create),
        ("update", kopf.on.update),
        ("resume", kopf.on.resume),
    ):
        on = decorator(
            GROUP, VERSION, plural, registry=registry, id=f"reconcile-{cause}", when=_active
        )
        on(reconcile_handler)
        on = decorator(
            GROUP, VERSION, plural, registry=registry, id=f"paused-{cause}", when=_paused
        )
        on(paused_handler)
    kopf.timer(
        GROUP,
        VERSION,
        plural,
        registry=registry,
        id="drift",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )(reconcile_handler)
    delete_handler = handler(delete_pass, deletion=True)
    for handler_id, when in (
        ("delete", _unforced),
        ("force-delete", _forced),
        ("paused-delete", _paused),
    ):
        kopf.on.delete(GROUP, VERSION, plural, registry=registry, id=handler_id, when=when)(
            delete_handler
        )
