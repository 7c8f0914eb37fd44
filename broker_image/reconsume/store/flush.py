"""Group commit: puts wait for the fsync that covers them, and share it.

Writers append under the store lock and then wait on :meth:`GroupCommit.request`. The flush
thread takes the current write position, fsyncs up to it once (without any lock: fdatasync
releases the GIL), then completes every waiter at or below it. However many puts arrive
during one fsync, the next fsync covers them all.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from concurrent.futures import Future, InvalidStateError

from reconsume.errors import StoreError


class GroupCommit:
    """Durable-offset bookkeeping between writers and the flush thread."""

    def __init__(self, flushed: int) -> None:
        self._cond = threading.Condition()
        self._flushed = flushed
        self._waiters: list[tuple[int, int, Future[None]]] = []
        self._seq = itertools.count()
        self._closed = False
        self._failed: BaseException | None = None

    @property
    def flushed(self) -> int:
        """Every byte below this offset is durable."""
        return self._flushed

    @property
    def pending(self) -> bool:
        return bool(self._waiters)

    def request(self, offset: int) -> Future[None]:
        """A future done once everything below ``offset`` is durable."""
        future: Future[None] = Future()
        with self._cond:
            if offset <= self._flushed:
                future.set_result(None)
                return future
            if self._failed is not None:
                future.set_exception(self._failed)
                return future
            if self._closed:
                future.set_exception(StoreError("the store is closed; the put was not flushed"))
                return future
            heapq.heappush(self._waiters, (offset, next(self._seq), future))
            self._cond.notify_all()
        return future

    def wait_for_work(self, timeout_s: float) -> None:
        """Block the flush thread until a waiter arrives or ``timeout_s`` passes."""
        with self._cond:
            if not self._waiters and not self._closed:
                self._cond.wait(timeout_s)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def advance(self, offset: int) -> None:
        """Record that everything below ``offset`` is durable and release its waiters."""
        done: list[Future[None]] = []
        with self._cond:
            if self._failed is not None:
                return
            if offset > self._flushed:
                self._flushed = offset
            while self._waiters and self._waiters[0][0] <= self._flushed:
                done.append(heapq.heappop(self._waiters)[2])
        for future in done:
            future.set_result(None)

    def rewind(self, offset: int) -> None:
        """The log was cut back to ``offset``: nothing above it is durable any more, and a put
        waiting above it waited for bytes that are gone."""
        with self._cond:
            self._flushed = min(self._flushed, offset)
            gone = [waiter for waiter in self._waiters if waiter[0] > offset]
            self._waiters = [waiter for waiter in self._waiters if waiter[0] <= offset]
            heapq.heapify(self._waiters)
        for _offset, _seq, future in gone:
            future.set_exception(StoreError(f"the log was cut back to offset {offset}"))

    def fail(self, error: BaseException) -> None:
        """Fail every waiter, now and later: after a failed fsync nothing written since the
        last good one is known to be durable, and no later fsync can prove it."""
        with self._cond:
            self._failed = error
            waiters, self._waiters = self._waiters, []
        for _offset, _seq, future in waiters:
            future.set_exception(error)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def all_done(futures: list[Future[None]]) -> Future[None]:
    """A future done when every one of ``futures`` is, failing with the first failure."""
    combined: Future[None] = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def done(future: Future[None]) -> None:
        error = future.exception()
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if combined.done():
            return
        if error is not None:
            with contextlib.suppress(InvalidStateError):
                combined.set_exception(error)
        elif last:
            with contextlib.suppress(InvalidStateError):
                combined.set_result(None)

    if not futures:
        combined.set_result(None)
    for future in futures:
        future.add_done_callback(done)
    return combined
