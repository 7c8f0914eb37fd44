"""asyncio transport for remoting commands, shared by servers and clients.

A :class:`Connection` carries requests both ways: it answers incoming requests through a
:class:`~reconsume.wire.dispatcher.Dispatcher` (a broker also *sends* requests to consumers on
their connection) and matches incoming responses to the futures of requests it sent, by
``opaque``. A frame that does not decode closes that connection only, with a log line naming
the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from reconsume.errors import FrameError, RemotingConnectError, RemotingTimeoutError
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import FLAG_RESPONSE, RemotingCommand
from reconsume.wire.dispatcher import Dispatcher, HandlerResult
from reconsume.wire.frame import MAX_FRAME_BYTES, FrameReader, encode_frame
from reconsume.wire.listen import peer_host_port

log = logging.getLogger(__name__)


class ResponseWaiter(Protocol):
    """What waits for a response: a future, or an object answering as one does."""

    def done(self) -> bool: ...

    def set_result(self, result: RemotingCommand, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class Connection(asyncio.Protocol):
    """One TCP connection speaking remoting frames."""

    answers_as_frames = True
    """Whether an answer may be encoded ahead and written later (:meth:`encode_reply`); a
    connection inside the server that takes answers in as commands says no."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._reader = FrameReader(max_frame_bytes)
        self._pending: dict[int, ResponseWaiter] = {}
        self._transport: asyncio.Transport | None = None
        self._on_close = on_close
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()
        """Kept: ``asyncio.get_running_loop`` is a getpid system call on each call (CPython
        3.11), once per request in :meth:`invoke` otherwise."""
        self.closed = self._loop.create_future()
        self.peer = "?"
        self.peer_host = "?"
        """The peer's IP address without the port (an IPv4 address as such, not
        IPv4-mapped)."""
        self.attributes: dict[str, Any] = {}
        """Per-connection state owned by the application (e.g. the client id)."""
        self._outbox: list[bytes] | None = None
        """While a read of any connection of the dispatcher is dispatched: the frames written
        to this one, written together when the read is done (one write instead of one per
        frame: the answers to the requests of one read, or the Sync-replicated sends one
        replica acknowledgement releases)."""

    # -------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport implements asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = peer_host_port(transport.get_extra_info("peername"))
        if peer is not None:
            self.peer_host = peer[0]
            self.peer = f"{peer[0]}:{peer[1]}"

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._reader.feed(data)
        except FrameError as exc:
            log.warning("%s: closing connection from %s: %s", self._dispatcher.name, self.peer, exc)
            self.close()
            return
        dispatcher = self._dispatcher
        outer = not dispatcher._reading
        if outer:
            dispatcher._reading = True
            dispatcher._direct = self if len(commands) == 1 else None
        try:
            for command in commands:
                if command.is_response:
                    future = self._pending.pop(command.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(command)
                else:
                    self._handle(command)
        finally:
            if outer:
                dispatcher._read_done()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        # Retriable: the request may or may not have reached the peer, as with any lost
        # connection; callers that retry (a producer) accept a possible duplicate, as RocketMQ's.
        error = RemotingConnectError(
            f"connection to {self.peer} closed" + (f": {exc}" if exc else "")
        )
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    # -------------------------------------------------------------- requests in
    def serve(self, request: RemotingCommand, *, checked: bool = False) -> None:
        """Run ``request`` as if it had been read from this connection: the guard (unless
        the caller ``checked`` its access itself), then its handler; the answer goes to
        :meth:`send` (a connection inside the server overrides it to take answers in, as the
        gRPC service does, which checks its own clients' credentials)."""
        self._handle(request, checked)

    def _handle(self, request: RemotingCommand, checked: bool = False) -> None:
        handler = self._dispatcher.handler(request.code)
        if handler is None:
            self._reply(
                request,
                request.respond(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f"{self._dispatcher.name}: request code {request.code} is not supported",
                ),
            )
            return
        guard = self._dispatcher.guard
        try:
            # A guard that fails answers SYSTEM_ERROR as a handler does; the request is not run.
            if guard is not None and not checked and (refusal := guard(request, self)) is not None:
                self._reply(request, refusal)
                return
            result = handler(request, self)
        except Exception as exc:  # noqa: BLE001 - any handler failure answers SYSTEM_ERROR
            self._reply(request, self._failure(request, exc))
            return
        # The cheap tests first: inspect.isawaitable's ABC check costs more per request, and
        # None (answered later, from elsewhere) is common under Sync flush and replication.
        if (
            result is not None
            and not isinstance(result, RemotingCommand)
            and inspect.isawaitable(result)
        ):
            task = asyncio.ensure_future(self._finish(request, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._reply(request, result)

    async def _finish(self, request: RemotingCommand, pending: Awaitable[HandlerResult]) -> None:
        try:
            response = await pending
        except Exception as exc:  # noqa: BLE001 - any handler failure answers SYSTEM_ERROR
            response = self._failure(request, exc)
        self._reply(request, response)

    def _failure(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        log.exception("%s: %s failed", self._dispatcher.name, request.describe())
        return request.respond(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` now, from outside its handler (whose result is then None)."""
        self._reply(request, response)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or request.is_oneway:
            return
        _answering(request, response)
        if not self.is_open:
            # The peer left while an async handler ran; send() would raise inside a task
            # nobody awaits.
            log.debug("%s left before %s was answered", self.peer, request.describe())
            return
        self.send(response)

    def encode_reply(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        """``response`` encoded as the answer to ``request``, for :meth:`send_encoded` later:
        an answer built while its request waits (for an fsync, for replicas) only has to be
        written when it is released. For a connection that :attr:`answers_as_frames` and a
        request that is not oneway."""
        _answering(request, response)
        return encode_frame(response)

    def send_encoded(self, frame: bytes) -> None:
        """Write a frame of :meth:`encode_reply`; dropped when the peer has left."""
        transport = self._transport
        if transport is None or transport.is_closing():
            log.debug("%s left before it was answered", self.peer)
            return
        self._write(transport, frame)

    # -------------------------------------------------------------- requests out
    def send(self, command: RemotingCommand) -> None:
        """Write one command (no answer expected or already an answer)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            raise RemotingConnectError(f"connection to {self.peer} is closed")
        self._write(transport, encode_frame(command))

    def _write(self, transport: asyncio.Transport, frame: bytes) -> None:
        """Write ``frame`` now, or hold it until the read being dispatched is done."""
        if self._outbox is not None:
            self._outbox.append(frame)
        elif self._dispatcher._reading and self._dispatcher._direct is not self:
            self._outbox = [frame]
            self._dispatcher._corked.append(self)
        else:
            transport.write(frame)

    def _uncork(self) -> None:
        outbox, self._outbox = self._outbox, None
        if outbox and self._transport is not None and not self._transport.is_closing():
            self._transport.write(outbox[0] if len(outbox) == 1 else b"".join(outbox))

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and wait for its response."""
        loop = self._loop
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[request.opaque] = future
        # A timer on the future itself: asyncio.timeout would add a handle and a context
        # manager's work per request.
        timer = loop.call_later(timeout_s, _expire, future)
        try:
            self.send(request)
            return await future
        except TimeoutError as exc:
            name = _code_name(request.code)
            raise RemotingTimeoutError(
                f"{name} to {self.peer}: no response within {timeout_s:g}s"
            ) from exc
        finally:
            timer.cancel()
            self._pending.pop(request.opaque, None)

    def expect(self, request: RemotingCommand, waiter: ResponseWaiter) -> None:
        """Send ``request`` now; its response goes to ``waiter`` as the read that holds it is
        dispatched (a lost connection to its ``set_exception``). No timer: the caller keeps
        its own, once for all its requests (a replica's exchange with its master)."""
        self._pending[request.opaque] = waiter
        self.send(request)

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def aclose(self) -> None:
        self.close()
        with contextlib.suppress(Exception):
            await self.closed


def _answering(request: RemotingCommand, response: RemotingCommand) -> None:
    # As RocketMQ's NettyRemotingAbstract does: the handler's command answers this request,
    # in its serialization type, however the handler built it.
    response.opaque = request.opaque
    response.flag |= FLAG_RESPONSE
    response.serialize_type = request.serialize_type


def _expire(future: asyncio.Future[RemotingCommand]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"
