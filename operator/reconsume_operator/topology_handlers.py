"""Kopf handlers of ConsumerGroups and Topics: thin wrappers around
:mod:`reconsume_operator.reconcile` that write status, conditions and events.

Create, update, resume and a drift timer all reconcile; deletion (behind the operator's
finalizer) carries out ``deletionPolicy``. A failure leaves ``Ready=False`` with the reason and
raises ``kopf.TemporaryError`` with a bounded, doubling delay; Kopf handles every object in its
own worker, so one object waiting does not hold up the others (deletions included).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from reconsume.topology import Kind, SpecError
from reconsume.topology.resources import PAUSED, Target, annotated, object_name, reconcile, remove
from reconsume_operator import events
from reconsume_operator import status as statuses
from reconsume_operator.conditions import READY, Condition
from reconsume_operator.conflicts import Claim, claim_key, claim_of, conflicting_owner
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.metrics import reconcile_timer
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


def register_topology(registry: kopf.OperatorRegistry, ctx: OperatorContext, kind: Kind) -> None:
    """Register the handlers of ``kind`` (groups or topics) in ``registry``."""
    plural = PLURALS[kind]
    label = KINDS[kind]

    @kopf.index(GROUP, VERSION, plural, registry=registry, id=CLAIMS_INDEX[kind])
    def claims(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Claim]:
        key = claim_key(namespace or "", _cluster_of(body), str(kind), object_name(kind, body))
        return {key: claim_of(body)}

    passes = ObjectLocks()

    def write(
        body: kopf.Body,
        patch: kopf.Patch,
        generation: int | None,
        conditions: list[Condition],
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """Status of the pass that began at ``generation``: a timer's body is live, so the
        generation it holds at the end may be newer than the spec the pass applied."""
        document = statuses.status_patch(
            body.get("status"), generation, utc_now(), conditions, fields
        )
        for key, value in document.items():
            patch.status[key] = value

    async def reconcile_handler(
        body: kopf.Body,
        patch: kopf.Patch,
        namespace: str | None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        retry: int = 0,
        **kwargs: Any,
    ) -> None:
        async with passes.hold(body):
            if deleting(body):
                return  # a drift pass that waited for the deletion: nothing left to do
            await reconcile_pass(body, patch, namespace, logger, retry, kwargs)

    async def reconcile_pass(
        body: kopf.Body,
        patch: kopf.Patch,
        namespace: str | None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        retry: int,
        kwargs: Mapping[str, Any],
    ) -> None:
        with reconcile_timer(label) as outcome:
            generation = body.meta.get("generation")
            if annotated(body, PAUSED):
                write(body, patch, generation, statuses.paused())
                outcome.result = "paused"
                return
            ns = namespace or ""
            cluster = _cluster_of(body)
            name = object_name(kind, body)
            all_claims: kopf.Index[Any, Claim] = kwargs[CLAIMS_INDEX[kind]]
            others = all_claims.get(claim_key(ns, cluster, str(kind), name)) or ()
            owner = conflicting_owner(claim_of(body), others)
            if owner is not None:
                write(
                    body,
                    patch,
                    generation,
                    statuses.conflict(str(kind), name, cluster, owner.resource),
                )
                outcome.result = "conflict"
                logger.warning(f"{kind} {name} belongs to the older {label} {owner.resource}")
                return
            target = _target(kwargs[CLUSTERS_INDEX], ns, cluster)
            if target is None:
                message = f"BrokerCluster {cluster} does not exist in namespace {ns}"
                write(
                    body, patch, generation, statuses.reconciled(False, "ClusterNotFound", message)
                )
                raise kopf.TemporaryError(message, delay=ctx.backoff_s(retry))
            try:
                result = await reconcile(kind, body, target, ctx.admin)
            except SpecError as exc:
                write(body, patch, generation, statuses.reconciled(False, "InvalidSpec", str(exc)))
                outcome.result = "invalid"
                raise kopf.PermanentError(str(exc)) from exc
            fields = (
                statuses.group_fields(result.status, utc_now())
                if kind is Kind.GROUP
                else dict(result.status)
            )
            write(
                body,
                patch,
                generation,
                statuses.reconciled(result.ready, result.reason, result.message),
                fields,
            )
            if result.changes:
                events.normal(body, "Configured", "; ".join(result.changes))
            if not result.ready:
                previous = statuses_ready(body)
                if previous != (result.reason, result.message):
                    events.warning(body, result.reason, result.message)
                raise kopf.TemporaryError(
                    f"{result.reason}: {result.message}", delay=ctx.backoff_s(retry)
                )
            outcome.result = "ok"

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

    @kopf.on.delete(GROUP, VERSION, plural, registry=registry, id="delete")
    async def delete_handler(
        body: kopf.Body,
        patch: kopf.Patch,
        namespace: str | None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        retry: int = 0,
        **kwargs: Any,
    ) -> None:
        # Kopf runs deletion handlers while a drift pass may still be applying the spec: the
        # deletion waits for it, so nothing it creates outlives the deletion.
        async with passes.hold(body):
            await delete_pass(body, patch, namespace, logger, retry, kwargs)

    async def delete_pass(
        body: kopf.Body,
        patch: kopf.Patch,
        namespace: str | None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        retry: int,
        kwargs: Mapping[str, Any],
    ) -> None:
        with reconcile_timer(label) as outcome:
            generation = body.meta.get("generation")
            ns = namespace or ""
            cluster = _cluster_of(body)
            name = object_name(kind, body)
            if annotated(body, PAUSED):
                logger.info(f"paused: {kind} {name} is left on the brokers")
                outcome.result = "paused"
                return
            all_claims: kopf.Index[Any, Claim] = kwargs[CLAIMS_INDEX[kind]]
            others = all_claims.get(claim_key(ns, cluster, str(kind), name)) or ()
            if conflicting_owner(claim_of(body), others) is not None:
                outcome.result = "conflict"  # not ours to delete
                return
            target = _target(kwargs[CLUSTERS_INDEX], ns, cluster)
            if target is None:
                logger.warning(
                    f"BrokerCluster {cluster} is gone; nothing to delete {kind} {name} from"
                )
                outcome.result = "ok"
                return
            try:
                result = await remove(kind, body, target, ctx.admin)
            except SpecError as exc:
                logger.warning(f"invalid spec, nothing deleted from the brokers: {exc}")
                outcome.result = "invalid"
                return
            if result.changes:
                events.normal(body, "Deleted", "; ".join(result.changes))
            if not result.ready:
                write(
                    body,
                    patch,
                    generation,
                    [Condition(READY, False, result.reason, result.message)],
                )
                events.warning(body, result.reason, result.message)
                outcome.result = "refused" if result.reason == "DeletionRefused" else "error"
                raise kopf.TemporaryError(
                    f"{result.reason}: {result.message}", delay=ctx.backoff_s(retry)
                )
            outcome.result = "ok"


def statuses_ready(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """The current Ready condition's reason and message (to post an event only on change)."""
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == READY:
            return str(condition.get("reason")), str(condition.get("message"))
    return None
