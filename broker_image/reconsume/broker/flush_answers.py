"""Writes under Sync flush answered once their fsync is done: by the fsync's completion, in
batches, without a task per write.

A waiting write costs a future of the group commit (it keeps the flush thread working) and an
entry here. The flush thread completing any of the futures schedules one release on the event
loop — completions before that release runs schedule nothing more — and the release answers
every write whose fsync is done as one read's requests are answered
(:meth:`reconsume.wire.dispatcher.Dispatcher.as_read`): one write per connection, whatever the
number of sends one fsync made durable. Awaiting each write's future in a task of its own cost a
hand-off to the loop (a self-pipe write) and a task step per write, and a socket write per
answer.

A write whose fsync has not completed ``timeout_s`` after it was stored is answered
FLUSH_DISK_TIMEOUT (it stays stored, as Apache RocketMQ's ``syncFlushTimeout`` says); one whose
fsync failed, SERVICE_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from reconsume.errors import StoreError
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

Answer = Callable[[int], None]
"""Told the response code of one write, once."""
_Waiting = tuple[Future[None], float, Answer]
"""A write's group-commit future, its deadline on the loop's clock and its answer."""


def run_now(callback: Callable[[], None]) -> None:
    """The default of :attr:`FlushAnswers.as_read`: no connections to batch writes for."""
    callback()


class FlushAnswers:
    """The writes of one store waiting for their fsync, on one event loop."""

    def __init__(
        self,
        durable: Callable[[int], Future[None]],
        as_read: Callable[[Callable[[], None]], None] = run_now,
    ) -> None:
        self._durable = durable
        self.as_read = as_read
        """Runs a release as a read is dispatched: the answers it writes to one connection
        leave in one write."""
        self._waiting: deque[_Waiting] = deque()
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def wait(self, end_offset: int, timeout_s: float, answer: Answer) -> None:
        """Call ``answer`` once everything below ``end_offset`` is durable (on the loop, from
        a release; at once when it already is)."""
        future = self._durable(end_offset)
        if future.done():
            tell(answer, _code(future))
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._waiting.append((future, deadline, answer))
        future.add_done_callback(self._flushed)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)

    def _flushed(self, _future: Future[None]) -> None:
        """In the flush thread (or the loop's, for a future done as it was added)."""
        if self._scheduled or self._loop is None:
            return
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._release)
        except RuntimeError:  # the loop is closed: nobody is left to answer
            self._scheduled = False

    def _release(self) -> None:
        # Cleared before the futures are looked at: a completion from now on schedules
        # another release, one before it is seen by this one.
        self._scheduled = False
        if self._waiting:
            self.as_read(self._answer_done)

    def _answer_done(self) -> None:
        waiting = self._waiting
        while waiting and waiting[0][0].done():
            future, _deadline, answer = waiting.popleft()
            tell(answer, _code(future))
        if any(future.done() for future, _deadline, _answer in waiting):
            # a later write's future failed before an earlier one's fsync (the log was cut
            # back below it): answer it now, keep the rest in order
            kept: deque[_Waiting] = deque()
            for entry in waiting:
                if entry[0].done():
                    tell(entry[2], _code(entry[0]))
                else:
                    kept.append(entry)
            self._waiting = kept
        self._rearm()

    def _expire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()

        def expire() -> None:
            waiting = self._waiting
            late = 0
            while waiting and waiting[0][1] <= now:
                future, _deadline, answer = waiting.popleft()
                if future.done():
                    tell(answer, _code(future))
                else:
                    late += 1
                    tell(answer, ResponseCode.FLUSH_DISK_TIMEOUT)
            if late:
                log.warning("%d writes: fsync did not complete in time (FLUSH_DISK_TIMEOUT)", late)

        self.as_read(expire)
        self._rearm()

    def _rearm(self) -> None:
        waiting = self._waiting
        if not waiting:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        elif self._timer is None:
            assert self._loop is not None
            self._timer = self._loop.call_at(waiting[0][1], self._expire)


def _code(future: Future[None]) -> int:
    exception = future.exception()
    if exception is None:
        return ResponseCode.SUCCESS
    if isinstance(exception, StoreError):
        log.warning("fsync failed: %s", exception)
        return ResponseCode.SERVICE_NOT_AVAILABLE
    log.error("waiting for an fsync failed", exc_info=exception)
    return ResponseCode.SYSTEM_ERROR


def tell(answer: Answer, code: int) -> None:
    """Call ``answer`` with ``code``; a failure is logged, not raised: whoever releases a batch
    of waiting writes (the fsync's release, a replica's acknowledgement) must answer the rest."""
    try:
        answer(code)
    except Exception:  # one answer failing must not keep the others waiting
        log.exception("answering a waiting write failed")


class PreparedReply:
    """The answer to a request waiting to count as stored (an :data:`Answer`): the SUCCESS
    answer built and encoded by :meth:`prepare` while it waits, so the release that tells
    SUCCESS only writes it; any other code, or an answer its connection does not take as a
    frame (:attr:`Connection.answers_as_frames`), is built when told and sent by
    :meth:`Connection.reply`."""

    __slots__ = ("_build", "_connection", "_frame", "_on_told", "_request", "_told")

    def __init__(
        self,
        connection: Connection,
        request: RemotingCommand,
        build: Callable[[int], RemotingCommand],
        on_told: Callable[[int], None] | None = None,
    ) -> None:
        self._connection = connection
        self._request = request
        self._build = build
        self._on_told = on_told
        """Called with the code before the answer leaves (what counts the outcome)."""
        self._frame: bytes | None = None
        self._told = False

    def prepare(self) -> None:
        """Build the SUCCESS answer now, unless the code was told already, the request is
        oneway (no answer) or its connection takes answers as commands."""
        connection, request = self._connection, self._request
        if not self._told and connection.answers_as_frames and not request.is_oneway:
            self._frame = connection.encode_reply(request, self._build(ResponseCode.SUCCESS))

    def __call__(self, code: int) -> None:
        self._told = True
        if self._on_told is not None:
            self._on_told(code)
        frame = self._frame
        if code == ResponseCode.SUCCESS and frame is not None:
            self._connection.send_encoded(frame)
        else:
            self._connection.reply(self._request, self._build(code))
