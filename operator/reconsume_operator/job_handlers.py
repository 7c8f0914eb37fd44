"""Kopf handlers of DeadLetterJobs: thin wrappers around
:meth:`reconsume_operator.job_sync.DeadLetterJobs.sync`, which starts runs and writes status.

* create, update and resume sync the resource (applying its CronJob and RBAC objects again);
  a run that cannot start yet (no ConsumerGroup, another run of the group unfinished, the API
  server refused a child) is ``Ready=False`` with the reason, and the handler is retried with
  the operator's backoff;
* every change of a Job labelled ``reconsume.io/dead-letter-job`` syncs its DeadLetterJob at
  once (Running, Succeeded, Failed), and once it is finished also the DeadLetterJobs of the
  same consumer group that wait for it;
* a ConsumerGroup that is Ready syncs the DeadLetterJobs waiting for it at once;
* a timer syncs every DeadLetterJob each drift interval (what no Job event reports: a
  SparkApplication's state).

Children carry owner references to the DeadLetterJob: Kubernetes deletes them with it.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf

from reconsume_operator import events
from reconsume_operator.conditions import ready_of
from reconsume_operator.context import GROUP, VERSION, OperatorContext
from reconsume_operator.dead_letter_jobs import GROUP_LABEL, JOB_LABEL, KIND
from reconsume_operator.job_kube import JobKube
from reconsume_operator.job_status import FAILED, FINISHED, job_finished
from reconsume_operator.job_sync import GROUP_WAITS, DeadLetterJobs, Synced
from reconsume_operator.kube import KubeError
from reconsume_operator.metrics import reconcile_timer
from reconsume_operator.passes import object_key

PLURAL = "deadletterjobs"

Logger = logging.Logger | logging.LoggerAdapter[Any]


def _events(synced: Synced) -> None:
    """Events on the DeadLetterJob for a run started or finished by this sync."""
    if synced.body is None or synced.state is None:
        return
    body = kopf.Body(cast(kopf.RawBody, dict(synced.body)))
    if synced.started:
        events.normal(body, "Started", f"{synced.started} started")
    if synced.finished:
        post = events.warning if synced.state.phase == FAILED else events.normal
        post(body, synced.state.phase, synced.state.message)


def register_jobs(registry: kopf.OperatorRegistry, ctx: OperatorContext, kube: JobKube) -> None:
    """Register the DeadLetterJob handlers in ``registry``; children are written with
    ``kube``."""
    jobs = DeadLetterJobs(kube, ctx.config, ctx)

    async def sync(body: kopf.Body, apply: bool) -> Synced:
        with reconcile_timer(KIND) as outcome:
            spec = body.get("spec") or {}
            synced = await jobs.sync(
                body.meta.namespace or "",
                body.meta.name or "",
                str(spec.get("consumerGroup") or ""),
                apply=apply,
            )
            _events(synced)
            outcome.result = "pending" if synced.retry else "ok"
            return synced

    async def reconcile(body: kopf.Body, retry: int = 0, **_: Any) -> None:
        try:
            synced = await sync(body, apply=True)
        except KubeError as exc:
            raise kopf.TemporaryError(str(exc), delay=ctx.backoff_s(retry)) from exc
        if synced.retry and synced.state is not None:
            message = f"{synced.state.reason}: {synced.state.message}"
            raise kopf.TemporaryError(message, delay=ctx.backoff_s(retry))

    for cause, decorator in (
        ("create", kopf.on.create),
        ("update", kopf.on.update),
        ("resume", kopf.on.resume),
    ):
        decorator(GROUP, VERSION, PLURAL, registry=registry, id=f"dead-letter-job-{cause}")(
            reconcile
        )

    @kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        registry=registry,
        id="dead-letter-job-status",
        interval=ctx.config.drift_interval_s,
        initial_delay=ctx.config.drift_interval_s,
    )
    async def refresh(body: kopf.Body, logger: Logger, **_: Any) -> None:
        current = body.get("status") or {}
        if (
            not (body.get("spec") or {}).get("schedule")
            and current.get("phase") in FINISHED
            and current.get("observedGeneration") == body.meta.get("generation")
        ):
            return  # a finished run changes no more (a deleted Job is an event)
        try:
            await sync(body, apply=False)
        except KubeError as exc:
            logger.warning(f"status not refreshed: {exc}")

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        labels={JOB_LABEL: kopf.PRESENT},
        registry=registry,
        id="dead-letter-job-runs",
    )
    async def run_changed(body: kopf.Body, logger: Logger, **kwargs: Any) -> None:
        annotations = body.meta.annotations
        name, group = annotations.get(JOB_LABEL), annotations.get(GROUP_LABEL)
        namespace = body.meta.namespace or ""
        if not name or not group:
            return
        try:
            with reconcile_timer(KIND) as outcome:
                synced = await jobs.sync(namespace, name, group, apply=False)
                _events(synced)
                outcome.result = "pending" if synced.retry else "ok"
            if kwargs.get("type") == "DELETED" or job_finished(body):
                for waiting in await jobs.waiting_for(namespace, group, name):
                    _events(await jobs.sync(namespace, waiting, group, apply=False))
        except KubeError as exc:
            logger.warning(f"DeadLetterJob {name} not synced: {exc}")

    ready_groups: set[str] = set()
    """ConsumerGroups (uid) last seen Ready."""

    @kopf.on.event(GROUP, VERSION, "consumergroups", registry=registry, id="dead-letter-job-groups")
    async def group_changed(body: kopf.Body, logger: Logger, **_: Any) -> None:
        # Only when Ready turns True (or is first seen True): the status patch of every drift
        # pass is an event too, and the waiting jobs need one look, not one per pass.
        key = object_key(body)
        ready = ready_of((body.get("status") or {}).get("conditions"))
        if ready is None or ready.get("status") != "True" or body.meta.get("deletionTimestamp"):
            ready_groups.discard(key)
            return
        if key in ready_groups:
            return
        ready_groups.add(key)
        namespace, group = body.meta.namespace or "", body.meta.name or ""
        try:
            for waiting in await jobs.waiting_for(namespace, group, reasons=GROUP_WAITS):
                _events(await jobs.sync(namespace, waiting, group, apply=True))
        except KubeError as exc:
            ready_groups.discard(key)  # look again on the next event
            logger.warning(f"DeadLetterJobs of ConsumerGroup {group} not synced: {exc}")
