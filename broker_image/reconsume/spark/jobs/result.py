"""A dead-letter job's result: one JSON object on stdout and in the termination message."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconsume.spark.jobs.params import Action

COUNTS = ("read", "matched", "archived", "resent", "purged", "kept", "skipped")
TERMINATION_MESSAGE_LIMIT = 4096
"""Bytes Kubernetes keeps of a container's termination message."""


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Result:
    action: Action
    group: str
    job: str
    dry_run: bool
    start_time: str
    phase: str = "Succeeded"
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    offsets: dict[str, Any] = field(default_factory=dict)
    completion_time: str | None = None
    reason: str | None = None
    message: str | None = None

    def failed(self, reason: str, message: str) -> Result:
        return replace(self, phase="Failed", reason=reason, message=message,
                       completion_time=now())  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "phase": self.phase,
            "action": self.action.value,
            "group": self.group,
            "job": self.job,
            "dryRun": self.dry_run,
            "counts": {k: int(self.counts.get(k, 0)) for k in COUNTS},
            "offsets": self.offsets,
            "startTime": self.start_time,
            "completionTime": self.completion_time or now(),
        }
        if self.reason is not None:
            data["reason"] = self.reason
            data["message"] = self.message or ""
        return data

    def to_json(self) -> str:
        """Compact JSON; the message is shortened so that the whole fits a termination
        message."""
        data = self.to_dict()
        text = json.dumps(data, separators=(",", ":"), sort_keys=True)
        if len(text.encode()) > TERMINATION_MESSAGE_LIMIT and "message" in data:
            spare = TERMINATION_MESSAGE_LIMIT - (len(text.encode()) - len(data["message"])) - 16
            data["message"] = data["message"][: max(0, spare)] + "..."
            text = json.dumps(data, separators=(",", ":"), sort_keys=True)
        return text


def publish(result: Result, termination_log: str | None) -> None:
    """Print ``result`` as the last line of stdout and write it to ``termination_log``."""
    text = result.to_json()
    print(text, flush=True)
    if termination_log:
        Path(termination_log).write_text(text)
