"""Bringing one DeadLetterJob's run and status up to date (Kopf-free; the handlers in
:mod:`reconsume_operator.job_handlers` call :meth:`DeadLetterJobs.sync`).

A sync reads the resource afresh, finds its run (the Job or SparkApplication of its current
generation, or the latest Job of its CronJob), starts the run when there is none yet, and
writes the status through the status subresource (only when it changes). Syncs of the
DeadLetterJobs of one consumer group (in one namespace) take turns under one lock, so two of
them never both see "no other run" and start together: while another DeadLetterJob's run of
the group is unfinished, a new run waits (``WaitingForJob``) and a CronJob is suspended. A run
(or a CronJob) is not created before its ConsumerGroup is Ready (``WaitingForConsumerGroup``):
until then its group and retry topics may not exist on the brokers, and the command would fail
at once; the handlers sync the waiting DeadLetterJobs when the group becomes Ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconsume.topology import Kind
from reconsume.topology.clusters import cluster_spec
from reconsume.topology.jobs import DeadLetterJobSpec, Source, job_spec
from reconsume.topology.resources import object_name
from reconsume_operator.conditions import ready_of
from reconsume_operator.config import OperatorConfig
from reconsume_operator.context import GROUP, VERSION, OperatorContext, utc_now
from reconsume_operator.credentials import CredentialsProblem
from reconsume_operator.dead_letter_jobs import (
    API_VERSION,
    GROUP_LABEL,
    JOB_LABEL,
    KIND,
    SPARK_API_VERSION,
    SPARK_CRD,
    cron_job,
    cron_job_name,
    job,
    label_value,
    rbac,
    run_name,
    spark_application,
)
from reconsume_operator.job_kube import JobKube
from reconsume_operator.job_security import secure_run
from reconsume_operator.job_status import (
    FAILED,
    FINISHED,
    PENDING,
    RunState,
    job_finished,
    job_state,
    kept_fields,
    newest,
    newly_finished,
    spark_finished,
    spark_state,
    status_changed,
    status_document,
)
from reconsume_operator.kube import KubeError
from reconsume_operator.metrics import DEAD_LETTER_JOB_RUNS
from reconsume_operator.naming import name_server

WAITING = "WaitingForJob"
WAITING_FOR_GROUP = "WaitingForConsumerGroup"
ACCESS_PENDING = "AccessPending"
"""The run's account is not yet enforced by every broker (or its ledger topic not made)."""
GROUP_WAITS = frozenset(
    {WAITING_FOR_GROUP, "ConsumerGroupNotFound", "ClusterNotFound", ACCESS_PENDING}
)
"""Reasons of a DeadLetterJob that waits for its ConsumerGroup (or its cluster) to be Ready."""
POD_JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name")


@dataclass(frozen=True, slots=True)
class Synced:
    """One sync: the resource (None when it is gone), the state written, whether to try again
    later (not started yet for a reason that may pass), the run started now and whether a
    finished run was recorded now."""

    body: Mapping[str, Any] | None
    state: RunState | None = None
    retry: bool = False
    started: str | None = None
    finished: bool = False


@dataclass(frozen=True, slots=True)
class _Step:
    state: RunState | None
    retry: bool = False
    started: str | None = None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotation(obj: Mapping[str, Any], key: str) -> str:
    return str((_meta(obj).get("annotations") or {}).get(key) or "")


def _owned_by(obj: Mapping[str, Any], kind: str, name: str, uid: str | None = None) -> bool:
    return any(
        ref.get("kind") == kind and ref.get("name") == name and uid in (None, ref.get("uid"))
        for ref in _meta(obj).get("ownerReferences") or ()
    )


def _ours(obj: Mapping[str, Any], spec: DeadLetterJobSpec) -> bool:
    return _owned_by(obj, KIND, spec.name, spec.uid)


class DeadLetterJobs:
    def __init__(
        self, kube: JobKube, config: OperatorConfig, ctx: OperatorContext | None = None
    ) -> None:
        self.kube = kube
        self.config = config
        self.ctx = ctx
        """Access control of the runs' clusters (None: runs carry no account of their own)."""
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def _lock(self, namespace: str, group: str) -> asyncio.Lock:
        return self._locks.setdefault((namespace, group), asyncio.Lock())

    async def _get(self, api_version: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.kube.get, api_version, kind, ns, name)

    async def _list(self, api_version: str, kind: str, ns: str, selector: str) -> list[Any]:
        return await asyncio.to_thread(self.kube.list, api_version, kind, ns, selector)

    async def _spark_operator(self) -> bool:
        """Whether spark-operator's SparkApplications are served (False also when the
        operator may not read CRDs: runs are then Jobs, which work without it)."""
        try:
            return await asyncio.to_thread(self.kube.serves, SPARK_CRD, "v1beta2")
        except KubeError:
            return False

    # -------------------------------------------------------------- entry points
    async def sync(self, namespace: str, name: str, group: str, *, apply: bool) -> Synced:
        """Sync the DeadLetterJob ``name`` of consumer group ``group``. ``apply``: also apply
        the CronJob and RBAC objects again and remove a CronJob the spec no longer asks for
        (on create, update and resume)."""
        async with self._lock(namespace, group):
            body = await self._get(API_VERSION, KIND, namespace, name)
            if body is None:
                return Synced(None)
            spec = job_spec(body)
            current = body.get("status") or {}
            try:
                if spec.schedule:
                    step = await self._scheduled(spec, apply)
                else:
                    step = await self._once(spec, current, apply)
            except KubeError as exc:
                phase = str(current.get("phase") or PENDING)
                kept = kept_fields(current)
                step = _Step(RunState(phase, False, "ChildrenFailed", str(exc), kept), retry=True)
            if step.state is None:
                return Synced(body, retry=step.retry)
            document = status_document(current, spec.generation, utc_now(), step.state)
            if status_changed(current, document):
                await asyncio.to_thread(
                    self.kube.patch_status, API_VERSION, KIND, namespace, name, document
                )
            finished = newly_finished(current, step.state)
            if finished:
                DEAD_LETTER_JOB_RUNS.labels(step.state.phase).inc()
            return Synced(body, step.state, step.retry, step.started, finished)

    async def waiting_for(
        self,
        namespace: str,
        group: str,
        finished_by: str = "",
        reasons: frozenset[str] = frozenset({WAITING}),
    ) -> list[str]:
        """The DeadLetterJobs of ``group`` (other than ``finished_by``) whose Ready reason is
        one of ``reasons``: waiting for a run to finish, or for the group."""
        found = await self._list(API_VERSION, KIND, namespace, "")
        names = []
        for body in found:
            name = str(_meta(body).get("name") or "")
            spec = body.get("spec") or {}
            ready = [
                c
                for c in (body.get("status") or {}).get("conditions") or ()
                if c.get("type") == "Ready"
            ]
            if name == finished_by or spec.get("consumerGroup") != group:
                continue
            if ready and ready[0].get("reason") in reasons:
                names.append(name)
        return sorted(names)

    # -------------------------------------------------------------- one run
    async def _once(
        self, spec: DeadLetterJobSpec, current: Mapping[str, Any], apply: bool
    ) -> _Step:
        ns = spec.namespace
        run = run_name(spec)
        if apply:  # a schedule that was removed
            cron = await self._get("batch/v1", "CronJob", ns, cron_job_name(spec))
            if cron is not None and _ours(cron, spec):
                await asyncio.to_thread(
                    self.kube.delete, "batch/v1", "CronJob", ns, cron_job_name(spec)
                )
        found = await self._get("batch/v1", "Job", ns, run)
        if found is not None:
            if not _ours(found, spec):
                raise KubeError(f"Job {run} exists and does not belong to {KIND} {spec.name}")
            return _Step(job_state(found, await self._job_pod(ns, run)))
        spark_operator = spec.kubernetes_master and await self._spark_operator()
        if spark_operator:
            app = await self._get(SPARK_API_VERSION, "SparkApplication", ns, run)
            if app is not None:
                return _Step(spark_state(app, await self._driver_pod(ns, app)))
        if current.get("jobName") == run:
            if current.get("phase") in FINISHED:
                return _Step(None)  # deleted after it ended: the status keeps the result
            message = f"{run} was deleted before it finished"
            return _Step(RunState(FAILED, False, "JobDeleted", message, kept_fields(current)))
        source = await self._source(spec)
        if isinstance(source, RunState):
            return _Step(source, retry=True)
        blocker = await self._blocker(spec, lambda obj: _meta(obj).get("name") == run)
        if blocker is not None:
            message = f"waiting for {blocker} to finish"
            return _Step(RunState(PENDING, False, WAITING, message), retry=True)
        image = spec.image or self.config.dlq_jobs_image
        for obj in rbac(spec):
            await asyncio.to_thread(self.kube.apply, obj)
        if spark_operator:
            main = self.config.dlq_jobs_main_file
            child = spark_application(spec, source, image, main)
        else:
            child = job(spec, source, image)
        await asyncio.to_thread(self.kube.create_missing, child)
        what = f"{child['kind']} {run}"
        state = RunState(PENDING, True, "JobCreated", f"{what} created", {"jobName": run})
        return _Step(state, started=what)

    # -------------------------------------------------------------- a schedule
    async def _scheduled(self, spec: DeadLetterJobSpec, apply: bool) -> _Step:
        ns = spec.namespace
        name = cron_job_name(spec)
        cron = await self._get("batch/v1", "CronJob", ns, name)
        blocker = await self._blocker(spec, lambda obj: _annotation(obj, JOB_LABEL) == spec.name)
        suspend = blocker is not None
        if cron is None or apply or bool((cron.get("spec") or {}).get("suspend")) != suspend:
            source = await self._source(spec)
            if isinstance(source, RunState):
                return _Step(source, retry=True)
            image = spec.image or self.config.dlq_jobs_image
            for obj in [*rbac(spec), cron_job(spec, source, image, suspend=suspend)]:
                await asyncio.to_thread(self.kube.apply, obj)
        extra: dict[str, Any] = {}
        last_schedule = ((cron or {}).get("status") or {}).get("lastScheduleTime")
        if last_schedule:
            extra["lastScheduleTime"] = last_schedule
        runs = await self._list("batch/v1", "Job", ns, f"{JOB_LABEL}={label_value(spec.name)}")
        last = newest([r for r in runs if _owned_by(r, "CronJob", name)])
        if last is None:
            message = f"CronJob {name} runs on schedule {spec.schedule!r}; no run yet"
            state = RunState(PENDING, True, "Scheduled", message, extra)
        else:
            last_name = str(_meta(last).get("name"))
            state = job_state(last, await self._job_pod(ns, last_name))
            state = RunState(state.phase, state.ready, state.reason, state.message,
                             {**state.fields, **extra})  # fmt: skip
        if blocker is not None:
            message = f"CronJob {name} is suspended: waiting for {blocker} to finish"
            return _Step(state.waiting(WAITING, message), retry=True)
        return _Step(state)

    # -------------------------------------------------------------- lookups
    async def _source(self, spec: DeadLetterJobSpec) -> Source | RunState:
        """The group's name servers (as pods reach them: an external cluster's address or the
        name-server Service) and RocketMQ group name, from the ConsumerGroup and its
        BrokerCluster; a Pending state when either does not exist."""
        ns = spec.namespace
        group = await self._get(f"{GROUP}/{VERSION}", "ConsumerGroup", ns, spec.consumer_group)
        if group is None:
            message = f"ConsumerGroup {spec.consumer_group} does not exist in namespace {ns}"
            return RunState(PENDING, False, "ConsumerGroupNotFound", message)
        ready = ready_of((group.get("status") or {}).get("conditions"))
        if ready is None or ready.get("status") != "True":
            why = "not reconciled yet"
            if ready is not None:
                why = f"{ready.get('reason')}: {ready.get('message')}"
            message = f"ConsumerGroup {spec.consumer_group} is not Ready ({why})"
            return RunState(PENDING, False, WAITING_FOR_GROUP, message)
        cluster = str((group.get("spec") or {}).get("cluster") or "")
        found = await self._get(f"{GROUP}/{VERSION}", "BrokerCluster", ns, cluster)
        if found is None:
            message = (
                f"BrokerCluster {cluster} of ConsumerGroup {spec.consumer_group} does not "
                f"exist in namespace {ns}"
            )
            return RunState(PENDING, False, "ClusterNotFound", message)
        cluster_of_group = cluster_spec(found, self.config.image)
        address = name_server(cluster_of_group)
        secret = None
        if self.ctx is not None:
            try:
                secret, waiting = await secure_run(self.ctx, spec, cluster_of_group, found)
            except CredentialsProblem as exc:
                return RunState(PENDING, False, "AccessControlFailed", str(exc))
            if waiting is not None:
                return RunState(PENDING, False, ACCESS_PENDING, waiting)
        return Source(
            address,
            object_name(Kind.GROUP, group),
            secret,
            cluster_of_group.tls_secret,
            cluster_of_group.tls_client_auth != "None",
        )

    async def _blocker(
        self, spec: DeadLetterJobSpec, mine: Callable[[Mapping[str, Any]], bool]
    ) -> str | None:
        """An unfinished run of another DeadLetterJob (or an earlier spec) of the same
        consumer group, described; None when there is none."""
        selector = f"{GROUP_LABEL}={label_value(spec.consumer_group)}"
        ns = spec.namespace

        def other(obj: Mapping[str, Any]) -> bool:
            return not mine(obj) and _annotation(obj, GROUP_LABEL) == spec.consumer_group

        def describe(kind: str, obj: Mapping[str, Any]) -> str:
            owner = _annotation(obj, JOB_LABEL)
            return (
                f"{kind} {_meta(obj).get('name')} of DeadLetterJob {owner} "
                f"(ConsumerGroup {spec.consumer_group})"
            )

        for found in await self._list("batch/v1", "Job", ns, selector):
            if other(found) and not job_finished(found):
                return describe("Job", found)
        if await self._spark_operator():
            kind = "SparkApplication"
            for found in await self._list(SPARK_API_VERSION, kind, ns, selector):
                if other(found) and not spark_finished(found):
                    return describe(kind, found)
        return None

    async def _job_pod(self, ns: str, job_name: str) -> Mapping[str, Any] | None:
        """The newest pod of the Job (labelled with its name by the Job controller)."""
        for label in POD_JOB_LABELS:
            pods = await self._list("v1", "Pod", ns, f"{label}={job_name}")
            if pods:
                return newest(pods)
        return None

    async def _driver_pod(self, ns: str, app: Mapping[str, Any]) -> Mapping[str, Any] | None:
        status = app.get("status") or {}
        pod = (status.get("driverInfo") or {}).get("podName")
        if not pod or status.get("applicationState", {}).get("state") not in _SPARK_DONE:
            return None
        return await self._get("v1", "Pod", ns, str(pod))


_SPARK_DONE = frozenset({"COMPLETED", "FAILED"})
