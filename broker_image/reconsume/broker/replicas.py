"""A master's view of its replicas: how far each has durably stored the log, which are in sync,
the gate a write passes under Sync replication and where consumers' reads stop.

A replica is **in sync** while it has held everything the master had at some moment within
the last ``lag_max_s`` seconds (Kafka's ``replica.lag.time.max.ms``; Apache RocketMQ 5's
``haMaxTimeSlaveNotCatchup``): a replica streaming behind a burst stays in the set, one that
stopped asking or cannot keep up leaves it. Under Sync replication a write counts as stored
once **every** in-sync replica has acknowledged it (:meth:`ReplicaSet.gate`), so any in-sync
replica holds every acknowledged write and may take over without losing one. With no replica
in sync a write is refused as Apache RocketMQ refuses it (``SLAVE_NOT_AVAILABLE``), unless
``accept_alone`` is set; then it is counted (:attr:`ReplicaSet.stored_alone_total`).

With automatic failover the set that counts is the one **recorded** in the lease
(:attr:`ReplicaSet.recorded`), since that is who may take over: a replica leaving the live set
still holds the writes up to the moment the record drops it, so writes wait for every recorded
member until the master has recorded the smaller set (``on_change`` asks for it), and a grown
set counts once recorded. Without a lease the live set counts.

Consumers read no further than :attr:`ReplicaSet.read_limit`, what every replica that may take
over holds: a record past it may vanish in a failover, and a consumer must not move past it.

A replica whose connection closed is kept aside (:attr:`ReplicaSet.departed`) as it was, for
the metrics only: how far behind a stopped replica falls is worth reporting until it returns.

Everything here runs on the broker's event loop; the gate's futures are
:class:`concurrent.futures.Future` so that the store's and the engine's waiters can share them;
a send or a send-back waits through :meth:`ReplicaSet.wait` with a waiter of its own
(:mod:`reconsume.broker.replica_answers`), told synchronously by the acknowledgement that
releases it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from reconsume.errors import ReplicaUnavailableError, StoreError

log = logging.getLogger(__name__)

MAX_DEPARTED = 8
"""Departed replicas kept for reporting, at most (the oldest departure goes first)."""


class Waiter(Protocol):
    """What a write waits with: a future of either kind (:mod:`concurrent.futures`,
    :mod:`asyncio`) or anything that is told the same way."""

    def done(self) -> bool: ...

    def set_result(self, result: None, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


@dataclass(slots=True)
class ReplicaState:
    """One replica as its requests show it."""

    replica_id: str
    address: str
    acked: int = 0
    """Commit-log offset below which the replica has stored everything (durably under Sync
    flush)."""
    requested: int = 0
    """Where its last request asked the stream to continue."""
    last_seen_s: float = 0.0
    caught_up_s: float | None = None
    """When the master last knew the replica held everything the master had."""
    sent_end: int = -1
    sent_end_s: float = 0.0
    """The master's log end when it last answered with everything up to it, and when."""
    in_sync: bool = False


class ReplicaSet:
    """The replicas of one master and the waiters of Sync replication."""

    def __init__(
        self,
        *,
        log_end: Callable[[], int],
        sync: bool,
        lag_max_s: float,
        accept_alone: bool,
        on_change: Callable[[frozenset[str]], None] | None = None,
        on_visible: Callable[[int | None], None] | None = None,
    ) -> None:
        self._log_end = log_end
        self.sync = sync
        self.lag_max_s = lag_max_s
        self.accept_alone = accept_alone
        self._on_change = on_change
        self._on_visible = on_visible
        self.replicas: dict[str, ReplicaState] = {}
        self.departed: dict[str, ReplicaState] = {}
        """Replicas whose connection closed, as they were then, in order of departure, until
        they return (reported only: they count for nothing else)."""
        self.recorded: frozenset[str] | None = None
        """The in-sync set as the lease records it; None without a lease (the live set
        counts)."""
        self._waiters: list[tuple[int, int, Waiter]] = []
        self._seq = itertools.count()
        self.stored_alone_total = 0
        """Writes confirmed with no replica in sync (``accept_alone``)."""
        self.refused_total = 0
        """Writes answered SLAVE_NOT_AVAILABLE."""
        self.read_limit: int | None = None
        """Where reads stop (:meth:`_limit`); None: nowhere."""

    # ------------------------------------------------------------------ replicas
    def seen(self, replica_id: str, address: str, requested: int, acked: int, now_s: float) -> None:
        """A replica asked for the log from ``requested`` having stored it below ``acked``."""
        state = self.replicas.get(replica_id)
        if state is None:
            # a returning replica starts afresh: it has to show again that it holds everything
            self.departed.pop(replica_id, None)
            state = self.replicas[replica_id] = ReplicaState(replica_id, address)
            log.info("replica %s (%s) connected at offset %d", replica_id, address, requested)
        state.address = address
        state.requested = requested
        state.acked = acked
        state.last_seen_s = now_s
        if acked >= self._log_end():
            state.caught_up_s = now_s
        elif state.sent_end >= 0 and acked >= state.sent_end:
            state.caught_up_s = max(state.caught_up_s or 0.0, state.sent_end_s)
        self._update(now_s)

    def answered(self, replica_id: str, end: int, reached_end: bool, now_s: float) -> None:
        """The master answered a replica with its log up to ``end`` (all of it, if
        ``reached_end``)."""
        state = self.replicas.get(replica_id)
        if state is not None and reached_end:
            state.sent_end, state.sent_end_s = end, now_s

    def forget(self, replica_id: str, now_s: float) -> None:
        """A replica is gone (its connection closed): it leaves the in-sync set at once."""
        state = self.replicas.pop(replica_id, None)
        if state is not None:
            log.info("replica %s disconnected", replica_id)
            state.in_sync = False
            self.departed[replica_id] = state
            while len(self.departed) > MAX_DEPARTED:  # in order of departure: drop the first
                del self.departed[next(iter(self.departed))]
            self._update(now_s)

    def reported(self, at_most: int) -> list[ReplicaState]:
        """The replicas to report, in identity order: every connected one, then departed ones
        (the latest departure first) while there are fewer than ``at_most``."""
        shown = list(self.replicas.values())
        room = max(at_most - len(shown), 0)
        gone = list(reversed(self.departed.values()))[:room]
        return sorted([*shown, *gone], key=lambda state: state.replica_id)

    def tick(self, now_s: float) -> None:
        """Re-judge who is in sync (called periodically: silence must count too)."""
        self._update(now_s)

    def _update(self, now_s: float) -> None:
        for state in self.replicas.values():
            in_sync = state.caught_up_s is not None and now_s - state.caught_up_s <= self.lag_max_s
            if in_sync != state.in_sync:
                state.in_sync = in_sync
                log.info(
                    "replica %s %s the in-sync set (stored up to %d, log end %d)",
                    state.replica_id,
                    "joined" if in_sync else "left",
                    state.acked,
                    self._log_end(),
                )
        self._release()
        self._limit()
        if self._on_change is not None:
            wanted = self.to_record()
            if wanted is not None:
                self._on_change(wanted)

    def live_ids(self) -> frozenset[str]:
        return frozenset(state.replica_id for state in self.replicas.values() if state.in_sync)

    def to_record(self) -> frozenset[str] | None:
        """The in-sync set the lease should record now; None when it should stay as it is: no
        lease, or it records the live set, or the live set is empty and no write may be
        accepted alone (then the recorded members, left or lagging, still hold every
        acknowledged write and one may take over if the master fails)."""
        if self.recorded is None:
            return None
        live = self.live_ids()
        if live == self.recorded or not (live or self.accept_alone):
            return None
        return live

    def record(self, members: frozenset[str]) -> None:
        """The lease now records ``members`` as the in-sync set."""
        self.recorded = members
        self._release()
        self._limit()

    @property
    def in_sync(self) -> list[ReplicaState]:
        return [state for state in self.replicas.values() if state.in_sync]

    def lag_bytes(self, replica_id: str) -> int:
        """Log bytes a replica, connected or departed, has not stored."""
        state = self.replicas.get(replica_id) or self.departed.get(replica_id)
        return 0 if state is None else max(self._log_end() - state.acked, 0)

    # ------------------------------------------------------------------ reads
    def _limit(self) -> None:
        """Set :attr:`read_limit`: the commit-log offset below which every replica that may
        take over holds the log, or None when no replica could take over.

        Consumers read no further: a record only the master holds may vanish in a failover,
        and a consumer that read it would have moved its offset past the new master's end
        of the queue and skip what the new master stores there."""
        holds = self._holds()
        limit = min(holds.values()) if holds else None
        if limit != self.read_limit:
            self.read_limit = limit
            if self._on_visible is not None:
                self._on_visible(limit)

    def read_limit_for(self, replica_id: str) -> int | None:
        """Where a replica's own reads stop: as the master's, but not counting the replica
        itself (None when no other could take over: its log is all in the master's, and the
        master's or its own is the one that continues)."""
        holds = self._holds()
        holds.pop(replica_id, None)
        return min(holds.values()) if holds else None

    def _holds(self) -> dict[str, int]:
        """How far each replica that may take over holds the log: recorded in the lease, or
        in sync and so about to be; a departed one as far as it got."""
        holds = {state.replica_id: state.acked for state in self.replicas.values() if state.in_sync}
        for member in self.recorded or ():
            state = self.replicas.get(member) or self.departed.get(member)
            holds[member] = 0 if state is None else state.acked
        return holds

    # ------------------------------------------------------------------ the gate
    def _counting(self) -> list[ReplicaState] | None:
        """Whose acknowledgement a write needs; None: nobody's can come (refuse, or accept
        alone)."""
        live = self.in_sync
        if self.recorded is None:
            return live or None
        if not self.recorded or (not live and not self.accept_alone):
            return None
        # with acceptance alone, a write waits until the lease records the smaller set
        missing = ReplicaState("", "", acked=-1)
        return [self.replicas.get(member, missing) for member in self.recorded]

    def caught_up(self, end_offset: int) -> Future[None]:
        """Done once every counted replica has stored the log up to ``end_offset``, whatever
        the replication mode (a master handing over); fails at once with nobody in sync."""
        future: Future[None] = Future()
        counting = self._counting()
        if counting is None:
            future.set_exception(ReplicaUnavailableError("no replica is in sync"))
        elif min(state.acked for state in counting) >= end_offset:
            future.set_result(None)
        else:
            heapq.heappush(self._waiters, (end_offset, next(self._seq), future))
        return future

    def gate(self, end_offset: int) -> Future[None]:
        """A future done once ``end_offset`` counts as stored on the replicas: at once without
        Sync replication; when every in-sync replica acknowledged it; failing with
        :class:`ReplicaUnavailableError` when none is in sync (unless ``accept_alone``)."""
        future: Future[None] = Future()
        self._enter(future, end_offset)
        return future

    def wait(self, waiter: Waiter, end_offset: int) -> None:
        """:meth:`gate` for a waiter of the caller's own (told synchronously, perhaps before
        this returns)."""
        self._enter(waiter, end_offset)

    def _enter(self, future: Waiter, end_offset: int) -> None:
        if not self.sync:
            future.set_result(None)
            return
        counting = self._counting()
        if counting is None:
            self._alone(future)
        elif min(state.acked for state in counting) >= end_offset:
            future.set_result(None)
        else:
            heapq.heappush(self._waiters, (end_offset, next(self._seq), future))

    def _alone(self, future: Waiter) -> None:
        if self.accept_alone:
            self.stored_alone_total += 1
            future.set_result(None)
        else:
            self.refused_total += 1
            future.set_exception(
                ReplicaUnavailableError("no replica is in sync: the write is on the master only")
            )

    def _release(self) -> None:
        if not self._waiters:
            return
        counting = self._counting()
        if counting is None:
            waiters, self._waiters = self._waiters, []
            for _offset, _seq, future in waiters:
                if not future.done():
                    self._alone(future)
            return
        floor = min(state.acked for state in counting)
        while self._waiters and self._waiters[0][0] <= floor:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        """Fail what still waits (the broker stops or stops being master)."""
        waiters, self._waiters = self._waiters, []
        for _offset, _seq, future in waiters:
            if not future.done():
                future.set_exception(StoreError("the broker stopped being master"))
