"""The ``status`` patch of a ConsumerGroup or Topic from one reconcile, as a pure function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from reconsume_operator.conditions import (
    CONFLICT,
    PAUSED,
    READY,
    Condition,
    merge_conditions,
    now_text,
)


def status_patch(
    current: Mapping[str, Any] | None,
    generation: int | None,
    now: datetime,
    conditions: Sequence[Condition],
    fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``fields`` and ``conditions`` merged into the current status's conditions, with
    ``observedGeneration``."""
    current = current or {}
    patch: dict[str, Any] = dict(fields or {})
    patch["observedGeneration"] = generation
    patch["conditions"] = merge_conditions(current.get("conditions"), conditions, generation, now)
    return patch


def reconciled(ready: bool, reason: str, message: str) -> list[Condition]:
    """The conditions of an object that was reconciled (not paused, not in conflict)."""
    return [
        Condition(READY, ready, reason, message),
        Condition(PAUSED, False, "Reconciling", "not paused"),
        Condition(CONFLICT, False, "Owner", "no older resource claims the same name"),
    ]


def paused() -> list[Condition]:
    """Paused: Ready is left as it was."""
    return [
        Condition(PAUSED, True, "Paused", 'annotated reconsume.io/paused: "true"; not reconciled')
    ]


def conflict(kind: str, name: str, cluster: str, owner: str) -> list[Condition]:
    message = f"{kind} {name} in cluster {cluster} belongs to the older resource {owner}"
    return [
        Condition(READY, False, "Conflict", message),
        Condition(PAUSED, False, "Reconciling", "not paused"),
        Condition(CONFLICT, True, "Conflict", message),
    ]


def group_fields(fields: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A group's status fields with the time its depths were read."""
    return {**fields, "depthTime": now_text(now)} if fields else {}
