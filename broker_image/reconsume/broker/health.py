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
    *, store_open: bool, namesrv_addresses: Sequence[str], registrations: int, stopping: bool
) -> Readiness:
    if stopping:
        return Readiness(False, "shutting down")
    if not store_open:
        return Readiness(False, "store recovering")
    if namesrv_addresses and registrations == 0:
        return Readiness(
            False, f"not registered with any name server yet ({';'.join(namesrv_addresses)})"
        )
    return Readiness(True, "ok")
