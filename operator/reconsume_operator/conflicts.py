"""Two resources claiming one group or topic in one cluster: the older one owns it.

"Older" is the earlier ``metadata.creationTimestamp`` (RFC 3339 in UTC, so text order is time
order), then the smaller ``metadata.name``, so every replica of the operator and every
reconcile agrees on the owner without coordination. The younger resource is reported
``Ready=False`` (reason ``Conflict``) and never configured on, or deleted from, the brokers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class Claim:
    """One resource's claim; ordered oldest first."""

    created: str
    """``metadata.creationTimestamp``"""
    resource: str
    """``metadata.name`` of the claiming resource."""


ClaimKey = tuple[str, str, str, str]
"""(namespace, cluster, kind, group or topic name)"""


def claim_key(namespace: str, cluster: str, kind: str, name: str) -> ClaimKey:
    return (namespace, cluster, kind, name)


def claim_of(body: Mapping[str, Any]) -> Claim:
    metadata = body.get("metadata") or {}
    return Claim(str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or ""))


def owner(claims: Iterable[Claim]) -> Claim | None:
    """The claim that wins: the oldest."""
    return min(claims, default=None)


def conflicting_owner(mine: Claim, claims: Iterable[Claim]) -> Claim | None:
    """The other resource that owns what ``mine`` claims, or None when ``mine`` owns it (or
    nobody else claims it)."""
    winner = owner([mine, *claims])
    return None if winner is None or winner.resource == mine.resource else winner
