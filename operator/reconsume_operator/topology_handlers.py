"""Kopf handlers of ConsumerGroups and Topics: thin wrappers around
:mod:`reconsume.topology.resources` that write status, conditions and events, one pass per
object at a time.

Create, update, resume and a drift timer all reconcile; deletion (behind the operator's
finalizer) carries out ``deletionPolicy``. A failure leaves ``Ready=False`` with the reason and
raises ``kopf.TemporaryError`` with a bounded, doubling delay; Kopf handles every object in its
own worker, so one object waiting does not hold up the others (deletions included).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from reconsume.topology import Kind, SpecError
from reconsume.topology.resources import PAUSED, Target, annotated, object_name, reconcile, remove
from reconsume_operator import events
from reconsume_operator import status as statuses
from reconsume_operator.conditions import READY, Condition
from reconsume_operator.conflicts import Claim, claim_key, claim_of, conflicting_owner
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.metrics import Outcome, reconcile_timer
from reconsume_operator.passes import ObjectLocks, deleting

PLURALS = {Kind.GROUP: "consumergroups", Kind.TOPIC: "topics"}
KINDS = {Kind.GROUP: "ConsumerGroup", Kind.TOPIC: "Topic"}
CLUSTERS_INDEX = "broker_clusters"
CLAIMS_INDEX = {Kind.GROUP: "group_claims", Kind.TOPIC: "topic_claims"}


def _cluster_of(body: Mapping[str, Any]) -> str:
    return str((body.get("spec") or {}).get("cluster") or "")


def _target(
    index: kopf.Index[tuple[str, str], Target], namespace: str, cluster: str
) -> Target | None:
    store = index.get((namespace, cluster))
    return None if store is None else next(iter(store), None)


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
        target = _target(p.indexes[CLUSTERS_INDEX], ns, cluster)
        if target is None:
            message = f"BrokerCluster {cluster} does not exist in namespace {ns}"
            p.write(statuses.reconciled(False, "ClusterNotFound", message))
            raise kopf.TemporaryError(message, delay=ctx.backoff_s(p.retry))
        try:
            result = await reconcile(kind, body, target, ctx.admin)
        except SpecError as exc:
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
            events.normal(body, "Configured", "; ".join(result.changes))
        if not result.ready:
            if statuses_ready(body) != (result.reason, result.message):
                events.warning(body, result.reason, result.message)
            raise kopf.TemporaryError(
                f"{result.reason}: {result.message}", delay=ctx.backoff_s(p.retry)
            )
        outcome.result = "ok"

    async def delete_pass(p: Pass) -> None:
        body, ns, outcome = p.body, p.namespace, p.outcome
        cluster = _cluster_of(body)
        name = object_name(kind, body)
        if annotated(body, PAUSED):
            p.logger.info(f"paused: {kind} {name} is left on the brokers")
            outcome.result = "paused"
            return
        all_claims: kopf.Index[Any, Claim] = p.indexes[CLAIMS_INDEX[kind]]
        others = all_claims.get(claim_key(ns, cluster, str(kind), name)) or ()
        if conflicting_owner(claim_of(body), others) is not None:
            outcome.result = "conflict"  # not ours to delete
            return
        target = _target(p.indexes[CLUSTERS_INDEX], ns, cluster)
        if target is None:
            p.logger.warning(
                f"BrokerCluster {cluster} is gone; nothing to delete {kind} {name} from"
            )
            outcome.result = "ok"
            return
        try:
            result = await remove(kind, body, target, ctx.admin)
        except SpecError as exc:
            p.logger.warning(f"invalid spec, nothing deleted from the brokers: {exc}")
            outcome.result = "invalid"
            return
        if result.changes:
            events.normal(body, "Deleted", "; ".join(result.changes))
        if not result.ready:
            p.write([Condition(READY, False, result.reason, result.message)])
            events.warning(body, result.reason, result.message)
            outcome.result = "refused" if result.reason == "DeletionRefused" else "error"
            raise kopf.TemporaryError(
                f"{result.reason}: {result.message}", delay=ctx.backoff_s(p.retry)
            )
        outcome.result = "ok"

    reconcile_handler = handler(reconcile_pass)
    kopf.on.create(GROUP, VERSION, plural, registry=registry, id="reconcile-create")(
        reconcile_handler
    )
    kopf.on.update(GROUP, VERSION, plural, registry=registry, id="reconcile-update")(
        reconcile_handler
    )
    kopf.on.resume(GROUP, VERSION, plural, registry=registry, id="reconcile-resume")(
        reconcile_handler
    )
    kopf.timer(
        GROUP,
        VERSION,
        plural,
        registry=registry,
        id="drift",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )(reconcile_handler)
    kopf.on.delete(GROUP, VERSION, plural, registry=registry, id="delete")(
        handler(delete_pass, deletion=True)
    )


def statuses_ready(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """The current Ready condition's reason and message (to post an event only on change)."""
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == READY:
            return str(condition.get("reason")), str(condition.get("message"))
    return None
