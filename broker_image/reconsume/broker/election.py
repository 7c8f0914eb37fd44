"""Who is master: each broker of a broker name runs an :class:`Elector` over the shared lease
(:mod:`reconsume.broker.lease`).

* The master renews the lease every ``duration_s / 3`` and may write until ``margin_s`` before
  ``duration_s`` has passed since it *sent* its last successful renewal
  (:attr:`Elector.valid_until`); a renewal that fails or finds another holder deposes it.
* A replica watches the lease. When its version has not moved for ``duration_s`` by the
  replica's own clock, the master is presumed gone, and a replica the lease lists as in sync
  takes it over in the next epoch (compare-and-swap: of several, one wins). Only an in-sync
  replica holds every acknowledged write, so no other may; ``unclean`` (Async replication,
  or Sync writes accepted alone) lets any replica take an expired lease that lists nobody.
* The first lease of a broker name is taken by the preferred broker (the one configured as
  ``broker_id`` 0) at once, by the others only if it has not appeared after two durations.

No quorum beyond the lease's own store is needed: on Kubernetes that is the API server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from reconsume.broker.lease import LeaseConflict, LeaseRecord, LeaseStore
from reconsume.errors import ReconsumeError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Leadership:
    """What an election step concluded."""

    master: bool
    epoch: int
    master_address: str | None
    """The master's address (this broker's own when ``master``); None: nobody holds it."""


class Elector:
    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        address: str,
        *,
        duration_s: float,
        margin_s: float,
        preferred: bool,
        unclean: bool,
        clock: Callable[[], float] = time.monotonic,
        floor_epoch: Callable[[], int] = lambda: 0,
    ) -> None:
        self.store = store
        self.identity = identity
        self.address = address
        self.duration_s = duration_s
        self.margin_s = margin_s
        self.preferred = preferred
        self.unclean = unclean
        self._clock = clock
        self.floor_epoch = floor_epoch
        """The latest epoch this broker's own log holds: a lease is taken in an epoch above
        it even when the lease's own is lower (a new Lease beside a store that was master
        before), so epoch histories only ever grow."""
        self._started = clock()
        self.record: LeaseRecord | None = None
        self._seen_version: str | None = None
        self._seen_at = self._started
        self.master = False
        self.valid_until = 0.0
        """Monotonic time until which this broker may write, as master."""
        self.takeovers = 0
        """Times this broker took the lease from another broker (a failover to it)."""
        self._lock = asyncio.Lock()
        """One lease operation at a time: a renewal and a write of the in-sync set read the
        same version, and the second would conflict with the first."""

    @property
    def renew_interval_s(self) -> float:
        """How often the master renews; replicas look twice as often, so a lease is seen
        expired at most a sixth of its duration late."""
        return self.duration_s / 3 if self.master else self.duration_s / 6

    async def step(self) -> Leadership:
        """Read the lease, then renew it (master) or take it when it expired (replica)."""
        async with self._lock:
            return await self._step()

    async def _step(self) -> Leadership:
        try:
            record = await self.store.read()
        except (OSError, ReconsumeError, ValueError, TypeError) as exc:
            log.warning("cannot read the lease: %s", exc)
            return self._leadership()
        now = self._clock()
        version = None if record is None else record.version
        if version != self._seen_version or self.record is None:
            self._seen_version, self._seen_at = version, now
        self.record = record
        if self.master:
            if record is None or record.holder != self.identity:
                self._deposed(f"the lease is held by {record and record.holder}")
            else:
                await self._write(replace(record, address=self.address), record)
        elif self._may_take(record, now):
            floor = self.floor_epoch()
            if record is None:
                taken = LeaseRecord(None, None, floor, duration_s=self.duration_s)
            else:
                taken = replace(record, duration_s=self.duration_s, epoch=max(record.epoch, floor))
            previous = None if record is None else record.holder
            if await self._write(taken.taken_by(self.identity, self.address), record):
                if record is not None and previous != self.identity:
                    self.takeovers += 1  # someone held it before (or handed it over)
                log.warning("took the lease in epoch %d from %s", self.epoch, previous or "nobody")
        return self._leadership()

    async def record_in_sync(self, members: frozenset[str]) -> bool:
        """As master, record ``members`` as the in-sync set; False when not (deposed)."""
        async with self._lock:  # a renewal in between would make this write conflict
            record = self.record
            if not self.master or record is None:
                return False
            await self._write(replace(record, in_sync=tuple(sorted(members))), record)
            return self.master

    async def release(self) -> None:
        """As master, give the lease up (a clean stop): an in-sync replica takes it at its next
        look instead of after a whole duration."""
        async with self._lock:
            if not self.master:
                return
            self.master = False
            self.valid_until = 0.0
            try:
                record = await self.store.read()
                if record is not None and record.holder == self.identity:
                    released = replace(record, holder=None, address=None)
                    await self.store.write(released, record.version)
                    log.info("handed the lease over in epoch %d", record.epoch)
            except (LeaseConflict, OSError, ReconsumeError, ValueError, TypeError) as exc:
                log.warning("cannot hand the lease over: %s", exc)

    @property
    def epoch(self) -> int:
        return 0 if self.record is None else self.record.epoch

    def _may_take(self, record: LeaseRecord | None, now: float) -> bool:
        if record is None:
            return self.preferred or now - self._started >= 2 * self.duration_s
        if record.holder == self.identity:
            # This broker held it before a restart. Its in-sync replicas hold every write it
            # acknowledged, while its own log may have lost a tail the OS never wrote (a node
            # that rebooted): one of them takes over once the lease expires. It takes the
            # lease back when nobody else may, or nobody did for two durations.
            return not record.in_sync or now - self._seen_at >= 2 * record.duration_s
        if record.holder is not None and now - self._seen_at < record.duration_s:
            return False
        if self.identity in record.in_sync:
            return True
        return not record.in_sync and (self.unclean or record.holder is None)

    async def _write(self, record: LeaseRecord, current: LeaseRecord | None) -> bool:
        """Store ``record`` over ``current``; whether it was stored (this broker is master)."""
        sent = self._clock()
        try:
            stored = await self.store.write(record, None if current is None else current.version)
        except LeaseConflict as exc:
            if self.master:
                self._deposed(str(exc))
            return False
        except (OSError, ReconsumeError, ValueError) as exc:
            log.warning("cannot write the lease: %s", exc)
            if self.master and self._clock() >= self.valid_until:
                self._deposed("the lease could not be renewed in time")
            return False
        self.record = stored
        self._seen_version, self._seen_at = stored.version, sent
        self.master = True
        self.valid_until = sent + stored.duration_s - self.margin_s
        return True

    def _deposed(self, why: str) -> None:
        log.warning("no longer master: %s", why)
        self.master = False
        self.valid_until = 0.0

    def _leadership(self) -> Leadership:
        record = self.record
        if self.master:
            return Leadership(True, self.epoch, self.address)
        if record is None or record.holder in (None, self.identity):
            # nobody holds it, or this broker did before it restarted: nobody to follow yet
            return Leadership(False, self.epoch, None)
        return Leadership(False, self.epoch, record.address)
