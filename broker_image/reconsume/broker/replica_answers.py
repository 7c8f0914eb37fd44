"""Writes under Sync replication answered once the in-sync replicas hold them: by the
acknowledgement that releases them (:meth:`ReplicaSet.wait`), with one timer for all of them.

Every waiting write has the same timeout, so their deadlines come in the order the writes were
stored: a queue in that order and one timer at its first deadline answer the late ones
FLUSH_SLAVE_TIMEOUT. A timer per write cost a heap entry on the event loop, its comparisons and
its cancellation when the acknowledgement came first — 5.8 % of a replicated send's
instructions on the master (bench/RESULTS.md). Entries already answered leave the queue from
its head as new writes arrive, so it holds about what is in flight, not a timeout's worth of
writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from reconsume.broker.flush_answers import Answer, run_now, tell
from reconsume.broker.replicas import ReplicaSet
from reconsume.errors import ReplicaUnavailableError
from reconsume.wire.codes import ResponseCode

log = logging.getLogger(__name__)


class ReplicaAnswer:
    """One write in the replica set's gate (a :class:`reconsume.broker.replicas.Waiter`),
    answered once with the code :meth:`BrokerContext.answer_when_stored` gives."""

    __slots__ = ("_answer", "finished")

    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self.finished = False

    def done(self) -> bool:
        return self.finished

    def set_result(self, result: None, /) -> None:
        self.finish(ResponseCode.SUCCESS)

    def set_exception(self, exception: BaseException, /) -> None:
        if isinstance(exception, ReplicaUnavailableError):
            self.finish(ResponseCode.SLAVE_NOT_AVAILABLE)
        else:
            self.finish(ResponseCode.SERVICE_NOT_AVAILABLE)

    def finish(self, code: int) -> None:
        if self.finished:
            return
        self.finished = True
        tell(self._answer, code)


class ReplicaAnswers:
    """The writes of one master waiting for their replicas, on one event loop."""

    def __init__(self, as_read: Callable[[Callable[[], None]], None] = run_now) -> None:
        self.as_read = as_read
        """Runs the expiry as a read is dispatched: the answers it writes to one connection
        leave in one write."""
        self._waiting: deque[tuple[float, ReplicaAnswer]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """Kept at the first wait: ``asyncio.get_running_loop`` costs a getpid system call on
        each call (CPython 3.11)."""

    def __len__(self) -> int:
        return len(self._waiting)

    def wait(self, replicas: ReplicaSet, end_offset: int, timeout_s: float, answer: Answer) -> None:
        """Call ``answer`` once every in-sync replica holds the log up to ``end_offset`` (from
        the acknowledgement that releases it; at once when refused or already held), or with
        FLUSH_SLAVE_TIMEOUT after ``timeout_s``."""
        entry = ReplicaAnswer(answer)
        replicas.wait(entry, end_offset)
        waiting = self._waiting
        while waiting and waiting[0][1].finished:
            waiting.popleft()
        if entry.finished:
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        waiting.append((deadline, entry))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        waiting = self._waiting

        def expire() -> None:
            late = 0
            while waiting and (waiting[0][1].finished or waiting[0][0] <= now):
                entry = waiting.popleft()[1]
                if not entry.finished:
                    late += 1
                    entry.finish(ResponseCode.FLUSH_SLAVE_TIMEOUT)
            if late:
                log.warning("%d writes: no acknowledgement of the replicas in time", late)

        self.as_read(expire)
        if waiting:
            self._timer = loop.call_at(waiting[0][0], self._expire)
