"""Whether the broker is ready for traffic: the answer ``/readyz`` gives.

Ready means the store has been opened (recovery done) and, when name servers are configured,
at least one of them accepted a registration, so clients can find the broker. A broker that is
shutting down is not ready, from the moment the shutdown begins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    reason: str
    """Why not ready (``ok`` when ready); ``/readyz`` answers it as the body."""


def readiness(
    *,
    store_open: bool,
    namesrv_addresses: Sequence[str],
    registrations: int,
    stopping: bool,
    last_refusal: str | None = None,
) -> Readiness:
    """``last_refusal``: why a name server last refused a registration (access control
    refusing a broker without the cluster's credential, a stale master), said with the
    reason for not being ready."""
    if stopping:
        return Readiness(False, "shutting down")
    if not store_open:
        return Readiness(False, "store recovering")
    if namesrv_addresses and registrations == 0:
        reason = f"not registered with any name server yet ({';'.join(namesrv_addresses)})"
        if last_refusal:
            reason += f"; last refusal: {last_refusal}"
        return Readiness(False, reason)
    return Readiness(True, "ok")
