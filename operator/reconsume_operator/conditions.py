"""Status conditions in the shape of Kubernetes' ``metav1.Condition``, as pure functions.

A condition keeps its ``lastTransitionTime`` while its status stays the same, so a timer that
writes the same Ready condition every drift interval does not look like a flapping object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

READY = "Ready"
PAUSED = "Paused"
CONFLICT = "Conflict"
MESSAGE_MAX_CHARS = 32_768
"""The CRDs' bound on a condition message."""


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def to_status(
        self, generation: int | None, now: datetime, previous: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The condition's object; ``lastTransitionTime`` from ``previous`` when the status
        did not change."""
        status = "True" if self.status else "False"
        since = now_text(now)
        if previous is not None and previous.get("status") == status:
            since = str(previous.get("lastTransitionTime") or since)
        document: dict[str, Any] = {
            "type": self.type,
            "status": status,
            "reason": self.reason,
            "message": self.message[:MESSAGE_MAX_CHARS],
            "lastTransitionTime": since,
        }
        if generation is not None:
            document["observedGeneration"] = generation
        return document


def now_text(now: datetime) -> str:
    """RFC 3339 in UTC with seconds, as Kubernetes writes times."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_conditions(
    current: Sequence[Mapping[str, Any]] | None,
    updates: Sequence[Condition],
    generation: int | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """``current`` with each of ``updates`` replacing the condition of its type (order kept,
    new types appended)."""
    by_type = {str(c.get("type")): dict(c) for c in current or ()}
    result = dict(by_type)
    for condition in updates:
        result[condition.type] = condition.to_status(generation, now, by_type.get(condition.type))
    return list(result.values())


def ready_of(conditions: Sequence[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    return next((c for c in conditions or () if c.get("type") == READY), None)
