"""A DeadLetterJob's status from what its run's objects report, as pure functions.

A run is a Job (or a SparkApplication). Its phase is ``Pending`` until its pod runs,
``Running`` while the Job is active, then ``Succeeded`` or ``Failed`` from the Job's
``Complete``/``Failed`` condition (the SparkApplication's ``applicationState.state``). The
counts, offsets and the reason of a failure come from the result JSON that ``reconsume dlq``
writes to the termination log (``/dev/termination-log``), which Kubernetes shows as the
container's ``state.terminated.message``; when the command died before writing it, the
message is the end of its log (``FallbackToLogsOnError``), whose last JSON line is the result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconsume_operator.conditions import READY, Condition, merge_conditions

PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
FINISHED = frozenset({SUCCEEDED, FAILED})
COUNT_KEYS = ("read", "matched", "archived", "resent", "purged", "kept", "skipped")
STATUS_FIELDS = (
    "phase",
    "startTime",
    "completionTime",
    "lastScheduleTime",
    "jobName",
    "counts",
    "offsets",
)
"""The status fields a run sets; those a new state leaves out are removed (merge patch null)."""
OFFSETS_MAX = 256
MESSAGE_TAIL_CHARS = 1_000
SPARK_DRIVER_CONTAINER = "spark-kubernetes-driver"
SPARK_PHASES = {
    "SUBMITTED": RUNNING,
    "RUNNING": RUNNING,
    "SUCCEEDING": RUNNING,
    "FAILING": RUNNING,
    "COMPLETED": SUCCEEDED,
    "FAILED": FAILED,
    "SUBMISSION_FAILED": FAILED,
}
"""spark-operator's application states; the others (none yet, PENDING_RERUN, INVALIDATING,
UNKNOWN) are Pending."""


@dataclass(frozen=True, slots=True)
class RunState:
    """What the status says about the latest run: phase, the Ready condition, and the other
    status fields (``jobName``, ``startTime`` ...)."""

    phase: str
    ready: bool
    reason: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    def waiting(self, reason: str, message: str) -> RunState:
        """The same run, with Ready=False for ``reason`` (a schedule held back)."""
        return replace(self, ready=False, reason=reason, message=message)


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("status") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


# ------------------------------------------------------------------ the result
def parse_result(text: str | None) -> dict[str, Any] | None:
    """The result JSON of ``reconsume dlq``: the whole termination message, else its last
    line that is a JSON object with a ``phase`` (a message taken from the log)."""
    if not text:
        return None
    for candidate in (text, *reversed(text.strip().splitlines())):
        candidate = candidate.strip()
        if not candidate.startswith("{"):
            continue
        try:
            document = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(document, dict) and "phase" in document:
            return document
    return None


def termination(pod: Mapping[str, Any] | None, container: str) -> tuple[str | None, int | None]:
    """The termination message and exit code of ``container`` of ``pod`` (else of the first
    container that terminated); (None, None) before it terminated."""
    statuses = [s for s in _status(pod).get("containerStatuses") or () if isinstance(s, Mapping)]
    statuses.sort(key=lambda s: s.get("name") != container)
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            code = terminated.get("exitCode")
            return terminated.get("message"), None if code is None else int(code)
    return None, None


def offsets_list(offsets: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The result's ``{"start": {topic: {"broker:queue": n}}, "end": ...}`` as the status's
    list of ``{broker, queueId, start, end}`` (sorted, at most 256)."""
    queues: dict[tuple[str, int], dict[str, Any]] = {}
    for edge in ("start", "end"):
        for per_queue in ((offsets or {}).get(edge) or {}).values():
            for key, offset in (per_queue or {}).items():
                broker, _, queue = str(key).rpartition(":")
                if not broker or not queue.isdigit() or not isinstance(offset, int):
                    continue
                entry = queues.setdefault(
                    (broker, int(queue)), {"broker": broker, "queueId": int(queue)}
                )
                entry[edge] = max(0, offset)
    return [queues[key] for key in sorted(queues)][:OFFSETS_MAX]


def counts_of(result: Mapping[str, Any]) -> dict[str, int]:
    counts = result.get("counts") or {}
    return {key: int(counts.get(key) or 0) for key in COUNT_KEYS}


def summary(counts: Mapping[str, int]) -> str:
    """``read 12, matched 6, resent 6, kept 6``: read and matched, and every other non-zero."""
    parts = [
        f"{key} {counts.get(key, 0)}"
        for key in COUNT_KEYS
        if key in ("read", "matched") or counts.get(key)
    ]
    return ", ".join(parts)


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_TAIL_CHARS else "..." + text[-MESSAGE_TAIL_CHARS:]


def finished_state(
    phase: str,
    what: str,
    fields: Mapping[str, Any],
    message_text: str | None,
    failure: str | None = None,
) -> RunState:
    """A finished run of ``what`` (``Job x``): ``fields`` completed from the result in
    ``message_text``; a failure's reason and message from the result, else ``JobFailed`` with
    ``failure`` (what Kubernetes says) and the end of the message."""
    result = parse_result(message_text)
    fields = dict(fields)
    if result is not None:
        for key in ("startTime", "completionTime"):
            if result.get(key):
                fields[key] = result[key]
        fields["counts"] = counts_of(result)
        fields["offsets"] = offsets_list(result.get("offsets"))
    dry_run = " (dry run)" if result is not None and result.get("dryRun") else ""
    if phase == SUCCEEDED:
        done = f": {summary(fields['counts'])}" if "counts" in fields else " (no result found)"
        return RunState(SUCCEEDED, True, SUCCEEDED, f"{what} succeeded{dry_run}{done}", fields)
    if result is not None and result.get("reason"):
        message = str(result.get("message") or f"{what} failed")
        return RunState(FAILED, False, str(result["reason"]), message, fields)
    message = f"{what} failed" + (f": {failure}" if failure else "")
    if message_text:
        message += f"; its output ends with: {_tail(message_text)}"
    return RunState(FAILED, False, "JobFailed", message, fields)


# ------------------------------------------------------------------ Jobs
def job_outcome(job: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    """Succeeded or Failed with the condition that says so; (None, {}) while unfinished."""
    for condition in _status(job).get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return SUCCEEDED, condition
        if condition.get("type") == "Failed":
            return FAILED, condition
    return None, {}


def job_finished(job: Mapping[str, Any]) -> bool:
    return job_outcome(job)[0] is not None


def job_state(job: Mapping[str, Any], pod: Mapping[str, Any] | None) -> RunState:
    """The run of ``job``; ``pod`` is its pod (the newest), None when there is none."""
    name = _name(job)
    status = _status(job)
    fields: dict[str, Any] = {"jobName": name}
    if status.get("startTime"):
        fields["startTime"] = status["startTime"]
    phase, condition = job_outcome(job)
    if phase is None:
        if status.get("active"):
            return RunState(RUNNING, True, RUNNING, f"Job {name} is running", fields)
        return RunState(PENDING, True, "JobCreated", f"Job {name} created; no pod runs yet", fields)
    completion = status.get("completionTime") or condition.get("lastTransitionTime")
    if completion:
        fields["completionTime"] = completion
    text, code = termination(pod, "dlq")
    failure = ": ".join(str(condition[k]) for k in ("reason", "message") if condition.get(k))
    if code:
        failure = f"{failure} (exit code {code})".strip()
    return finished_state(phase, f"Job {name}", fields, text, failure or None)


# ------------------------------------------------------------------ SparkApplications
def spark_state(app: Mapping[str, Any], driver: Mapping[str, Any] | None) -> RunState:
    """The run of a SparkApplication (``driver``: its driver pod, when known)."""
    name = _name(app)
    status = _status(app)
    application = status.get("applicationState") or {}
    state = str(application.get("state") or "")
    phase = SPARK_PHASES.get(state, PENDING)
    fields: dict[str, Any] = {"jobName": name}
    if status.get("lastSubmissionAttemptTime"):
        fields["startTime"] = status["lastSubmissionAttemptTime"]
    what = f"SparkApplication {name}"
    if phase in FINISHED:
        if status.get("terminationTime"):
            fields["completionTime"] = status["terminationTime"]
        text, _ = termination(driver, SPARK_DRIVER_CONTAINER)
        error = application.get("errorMessage")
        failure = f"{state}: {error}" if error else state
        return finished_state(phase, what, fields, text, failure)
    if phase == RUNNING:
        return RunState(RUNNING, True, RUNNING, f"{what} is {state}", fields)
    message = f"{what} created (state: {state or 'none yet'})"
    return RunState(PENDING, True, "Submitted", message, fields)


def spark_finished(app: Mapping[str, Any]) -> bool:
    state = str((_status(app).get("applicationState") or {}).get("state") or "")
    return SPARK_PHASES.get(state) in FINISHED


# ------------------------------------------------------------------ the status document
def status_document(
    current: Mapping[str, Any] | None,
    generation: int | None,
    now: datetime,
    state: RunState,
) -> dict[str, Any]:
    """The whole status for ``state``: its fields, ``phase``, ``observedGeneration`` and the
    Ready condition merged into the current conditions; fields it leaves out are None (a
    merge patch removes them)."""
    current = current or {}
    document: dict[str, Any] = dict.fromkeys(STATUS_FIELDS)
    document.update({k: v for k, v in state.fields.items() if k in STATUS_FIELDS})
    document["phase"] = state.phase
    document["observedGeneration"] = generation
    ready = Condition(READY, state.ready, state.reason, state.message)
    document["conditions"] = merge_conditions(current.get("conditions"), [ready], generation, now)
    return document


def status_changed(current: Mapping[str, Any] | None, document: Mapping[str, Any]) -> bool:
    """Whether writing ``document`` changes the status. Counts the API server pruned (a CRD
    that does not define them yet) do not count as a change."""
    current = current or {}
    for key, value in document.items():
        have = current.get(key)
        if key == "counts" and isinstance(value, Mapping) and isinstance(have, Mapping):
            value = {k: v for k, v in value.items() if k in have}
        if value != have:
            return True
    return False


def newly_finished(current: Mapping[str, Any] | None, state: RunState) -> bool:
    """Whether ``state`` records a finished run the current status does not show finished
    yet (the run is counted in ``dead_letter_job_runs_total`` once)."""
    current = current or {}
    if not state.finished:
        return False
    same_run = current.get("jobName") == state.fields.get("jobName")
    return not (same_run and current.get("phase") == state.phase)


def kept_fields(current: Mapping[str, Any] | None) -> dict[str, Any]:
    """The current status's run fields (a state that changes only the condition)."""
    current = current or {}
    return {key: current[key] for key in STATUS_FIELDS if key != "phase" and key in current}


def newest(objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The object created last (then the greatest name)."""

    def key(obj: Mapping[str, Any]) -> tuple[str, str]:
        metadata = obj.get("metadata") or {}
        return str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")

    return max(objects, key=key, default=None)
