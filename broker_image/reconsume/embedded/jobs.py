"""DeadLetterJobs in embedded mode: each run a local ``reconsume dlq`` process on Spark.

A run is what the operator's Job pod runs (the same arguments, built by
:func:`reconsume.topology.jobs.job_arguments`), as a child process whose output goes to
``<data>/logs/job-<name>.log`` and whose result JSON to its termination log. As with the
operator:

* without ``spec.schedule`` a spec runs once: a changed spec is a new run, an unchanged one
  (also after a restart of embedded mode) is not run again;
* with a schedule, runs start when the cron schedule comes due (UTC); a run still going when
  the next is due delays it (the CronJob's ``concurrencyPolicy: Forbid``);
* runs on the same consumer group's dead letters never overlap: one waits for the other.

Spark masters other than ``local``/``local[...]`` and ``spark://`` are refused: a ``k8s://``
master needs the cluster the operator runs in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconsume.embedded.cron import CronSchedule
from reconsume.embedded.manifests import Key, Manifest
from reconsume.embedded.processes import Child
from reconsume.store.atomic import write_atomically
from reconsume.topology.jobs import (
    DeadLetterJobSpec,
    Source,
    job_arguments,
    job_spec,
    resource_conf,
)

log = logging.getLogger(__name__)

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"

Resolve = Callable[[Manifest], Source | str]
"""A job's name servers and RocketMQ group, or why they are unknown."""


def fingerprint(spec: Mapping[str, Any]) -> str:
    """What identifies a spec's run (a changed spec is a new run), like a generation."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(when: datetime | None) -> str | None:
    return None if when is None else when.strftime("%Y-%m-%dT%H:%M:%SZ")


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java), or None."""
    if shutil.which("java") is None:
        return (
            "Java is not installed or not on PATH: Spark needs a Java 17 or 21 runtime "
            "(e.g. apt-get install openjdk-17-jre-headless, or set PATH to include $JAVA_HOME/bin)"
        )
    return None


def master_problem(master: str) -> str | None:
    if master == "local" or master.startswith(("local[", "spark://")):
        return None
    return f"spec.spark.master: {master} cannot run here (only local[...] and spark:// masters)"


@dataclass(slots=True)
class JobState:
    """One DeadLetterJob: its last run and what comes next (persisted in ``jobs.json``)."""

    key: Key
    fingerprint: str = ""
    phase: str = PENDING
    message: str = ""
    runs: int = 0
    start_time: str | None = None
    completion_time: str | None = None
    last_schedule_time: str | None = None
    next_run: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    log: str | None = None
    child: Child | None = None
    due: bool = False
    """A run should start as soon as nothing else holds its group."""

    def to_json(self) -> dict[str, Any]:
        kind, namespace, name = self.key
        return {
            "kind": kind, "namespace": namespace, "name": name,
            "fingerprint": self.fingerprint, "phase": self.phase, "message": self.message,
            "runs": self.runs, "startTime": self.start_time,
            "completionTime": self.completion_time,
            "lastScheduleTime": self.last_schedule_time, "nextRun": self.next_run,
            "counts": self.counts, "log": self.log, "due": self.due,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobState:
        state = cls((str(data["kind"]), str(data["namespace"]), str(data["name"])))
        state.fingerprint = str(data.get("fingerprint") or "")
        state.phase = str(data.get("phase") or PENDING)
        state.message = str(data.get("message") or "")
        state.runs = int(data.get("runs") or 0)
        state.start_time = data.get("startTime")
        state.completion_time = data.get("completionTime")
        state.last_schedule_time = data.get("lastScheduleTime")
        state.counts = dict(data.get("counts") or {})
        state.log = data.get("log")
        state.due = bool(data.get("due"))
        if state.phase == RUNNING:  # embedded mode stopped while it ran: it did not finish
            state.phase, state.message = FAILED, "interrupted: reconsume up stopped during the run"
        return state


class JobRunner:
    """Starts, watches and records the runs of every DeadLetterJob manifest."""

    def __init__(self, data_dir: Path, resolve: Resolve) -> None:
        self.data_dir = data_dir
        self.resolve = resolve
        self.states: dict[Key, JobState] = {}
        self._lock = asyncio.Lock()
        self._file = data_dir / "jobs.json"
        if self._file.exists():
            for item in json.loads(self._file.read_text()):
                state = JobState.from_json(item)
                self.states[state.key] = state

    def save(self) -> None:
        if not self.data_dir.is_dir():  # embedded mode failed to create it: nothing ran
            return
        data = [s.to_json() for _, s in sorted(self.states.items())]
        write_atomically(self._file, json.dumps(data, indent=1).encode())

    def state(self, key: Key) -> JobState | None:
        return self.states.get(key)

    async def sync(self, manifests: Mapping[Key, Manifest], now: datetime | None = None) -> None:
        """Bring the runs in line with the manifests: finished runs recorded, due runs started,
        runs of removed manifests stopped. Passes run one at a time: a pass that met a run
        still being spawned by another would take it for one that has exited."""
        async with self._lock:
            await self._sync(manifests, now or _now())

    async def _sync(self, manifests: Mapping[Key, Manifest], now: datetime) -> None:
        for key in sorted(set(self.states) - set(manifests)):
            state = self.states.pop(key)
            if state.child is not None and state.child.running:
                log.info("stopping the run of %s/%s: its manifest is gone", key[1], key[2])
                await state.child.stop()
        for key, manifest in sorted(manifests.items()):
            state = self.states.setdefault(key, JobState(key))
            await self._finish(state)
            self._plan(state, manifest, now)
        busy = {self._group(manifests[k]) for k, s in self.states.items() if s.phase == RUNNING}
        for key, manifest in sorted(manifests.items()):
            state = self.states[key]
            if not state.due:
                continue
            group = self._group(manifest)
            if group in busy:
                state.phase = PENDING
                state.message = f"waiting for another run on the dead letters of {group}"
                continue
            await self._start(state, manifest, now)
            if state.phase == RUNNING:
                busy.add(group)
        self.save()

    @staticmethod
    def _group(manifest: Manifest) -> str:
        return f"{manifest.namespace}/{manifest.spec.get('consumerGroup')}"

    def _plan(self, state: JobState, manifest: Manifest, now: datetime) -> None:
        if state.phase == RUNNING:
            return
        spec_print = fingerprint(dict(manifest.spec))
        schedule_text = manifest.spec.get("schedule")
        if not schedule_text:
            state.next_run = None
            if state.fingerprint != spec_print:
                state.fingerprint, state.due = spec_print, True
            return
        schedule = CronSchedule.parse(str(schedule_text))
        if state.fingerprint != spec_print:
            # A new or changed schedule starts counting now (the CronJob is created now).
            state.fingerprint, state.last_schedule_time = spec_print, _stamp(now)
            state.phase, state.message = PENDING, "waiting for the schedule"
        last = state.last_schedule_time
        since = datetime.strptime(last, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if last else now
        upcoming = schedule.next_after(since)
        state.next_run = _stamp(upcoming)
        if upcoming <= now:
            state.due = True
            state.last_schedule_time = _stamp(now)
            state.next_run = _stamp(schedule.next_after(now))

    async def _start(self, state: JobState, manifest: Manifest, now: datetime) -> None:
        spec = job_spec(manifest.body)
        problem = master_problem(spec.master)
        if problem is not None:  # only a new spec can mend it: this run fails
            state.due, state.runs = False, state.runs + 1
            state.start_time = state.completion_time = _stamp(now)
            state.phase, state.message, state.counts = FAILED, problem, {}
            log.error("%s: %s", manifest.describe(), problem)
            return
        # What may mend itself (a group or cluster declared later, Java installed) keeps the
        # run due: it starts on the first pass that finds everything, as the operator retries.
        source = self.resolve(manifest)
        waiting = java_problem() or (source if isinstance(source, str) else None)
        if waiting is not None:
            message = f"cannot start yet: {waiting}"
            if (state.phase, state.message) != (PENDING, message):
                log.warning("%s: %s", manifest.describe(), message)
            state.phase, state.message = PENDING, message
            return
        state.due, state.runs = False, state.runs + 1
        state.start_time, state.completion_time, state.counts = _stamp(now), None, {}
        assert isinstance(source, Source)
        result = self._result_file(state)
        result.parent.mkdir(parents=True, exist_ok=True)
        child = Child(
            f"job {manifest.name}",
            ["dlq", *command_arguments(spec, source), "--termination-log", str(result)],
            self.data_dir / "logs" / f"job-{manifest.namespace}-{manifest.name}.log",
        )
        state.child, state.log = child, str(child.log_path)
        state.phase, state.message = RUNNING, f"run {state.runs} started"
        log.info("%s: run %d started (log %s)", manifest.describe(), state.runs, child.log_path)
        await child.spawn()

    def _result_file(self, state: JobState) -> Path:
        """Where the current run of ``state`` writes its result JSON."""
        _, namespace, name = state.key
        return self.data_dir / "jobs" / namespace / name / str(state.runs) / "result.json"

    async def _finish(self, state: JobState) -> None:
        child = state.child
        if child is None or child.running:
            return
        code = await child.wait()
        state.child = None
        state.completion_time = _stamp(_now())
        kind, namespace, name = state.key
        result_file = self._result_file(state)
        try:
            result = json.loads(result_file.read_text())
        except (OSError, ValueError):
            state.phase = FAILED
            state.message = f"exited with {code} without a result; its log:\n{child.tail()}"
        else:
            state.counts = {k: int(v) for k, v in (result.get("counts") or {}).items()}
            state.phase = str(result.get("phase") or (SUCCEEDED if code == 0 else FAILED))
            state.message = str(result.get("message") or result.get("reason") or "")
        log.info("%s %s/%s run %d: %s %s", kind, namespace, name, state.runs, state.phase,
                 state.counts or state.message)  # fmt: skip

    async def stop(self) -> None:
        """Stop every run (SIGTERM, then SIGKILL after 30 s). A job's offsets move only after
        its work is done, so an interrupted run has handled nothing for good: it is recorded
        as Failed, and a changed spec runs it again over the same dead letters."""
        async with self._lock:
            for state in self.states.values():
                if state.child is not None and state.child.running:
                    await state.child.stop(timeout_s=30.0)
                    await self._finish(state)
            self.save()


def command_arguments(spec: DeadLetterJobSpec, source: Source) -> list[str]:
    """``reconsume dlq`` arguments of a local run: the job's, then Spark's master and conf."""
    conf = resource_conf(spec)
    if not spec.master.startswith("spark://"):
        # Everything is on this machine: no lookup of the host's name (which may not resolve).
        conf["spark.driver.host"] = "127.0.0.1"
    conf.update(spec.conf)
    arguments = [*job_arguments(spec, source), "--master", spec.master]
    for key, value in conf.items():
        arguments += ["--conf", f"{key}={value}"]
    return arguments
