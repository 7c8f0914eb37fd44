"""gRPC over :mod:`reconsume.wire.h2.connection`: calls, their messages and their status.

A method is unary, server-streaming or bidirectional (:class:`Method`); its behavior is a
coroutine (unary) or an async generator, given the parsed request (or an async iterator of
them) and a :class:`CallContext`. The response of a unary call leaves as HEADERS, DATA and
trailers written in the same turn of the loop; a call that fails before its first message is
answered "Trailers-Only". Statuses, percent-encoded messages, ``grpc-timeout`` and
``grpc-encoding`` (identity, gzip, deflate) as the gRPC over HTTP/2 specification has them.
Which call a request stream opens is :mod:`reconsume.wire.h2.router`'s.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from reconsume.wire.h2.api import Abort, CallContext, Method, StatusCode
from reconsume.wire.h2.hpack import Header
from reconsume.wire.h2.hpack import encode as encode_headers
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.h2.streams import Stream

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 << 20
"""The largest request message taken (larger: RESOURCE_EXHAUSTED)."""
MAX_UNREAD = 1024
"""Request messages of a bidirectional call its behavior has not read yet; one more fails the
call with RESOURCE_EXHAUSTED (HTTP/2's windows are credited as data arrives, so this is what
bounds a client that streams faster than the server reads)."""


RESPONSE_HEADERS = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS_OK = encode_headers([("grpc-status", "0")])


def percent_encode(text: str) -> str:
    """``grpc-message``'s encoding: UTF-8, octets outside printable ASCII and ``%`` as %XX."""
    raw = text.encode("utf-8", "replace")
    if all(0x20 <= byte <= 0x7E and byte != 0x25 for byte in raw):
        return text
    return "".join(
        chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x25 else f"%{byte:02X}" for byte in raw
    )


def status_block(code: StatusCode, details: str, trailers_only: bool) -> bytes:
    if code is StatusCode.OK and not details and not trailers_only:
        return TRAILERS_OK
    headers: list[Header] = []
    if trailers_only:
        headers += [(":status", "200"), ("content-type", "application/grpc")]
    headers.append(("grpc-status", str(int(code))))
    if details:
        headers.append(("grpc-message", percent_encode(details)))
    return encode_headers(headers)


_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def parse_timeout(value: str) -> float | None:
    """Seconds of a ``grpc-timeout`` (``1S``, ``250m``); None when it does not parse."""
    unit = _TIMEOUT_UNITS.get(value[-1:])
    digits = value[:-1]
    if unit is None or not digits.isdigit() or len(digits) > 8:
        return None
    return int(digits) * unit


class _Requests:
    """The request messages of a bidirectional call, as the behavior iterates them."""

    def __init__(self, parse: Callable[[bytes], Any]) -> None:
        self._parse = parse
        self._messages: deque[bytes] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None

    @property
    def unread(self) -> int:
        return len(self._messages)

    def put(self, message: bytes) -> None:
        self._messages.append(message)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        while not self._messages:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        return self._parse(self._messages.popleft())


class Call:
    """One call on one stream: it reads the request messages and answers the stream."""

    __slots__ = (
        "_buffer",
        "_deadline",
        "_decompress",
        "_name",
        "_recorded",
        "_requests",
        "_sent_headers",
        "_stats",
        "_task",
        "context",
        "method",
        "stream",
    )

    def __init__(
        self,
        stream: Stream,
        method: Method,
        context: CallContext,
        decompress: Callable[[bytes], bytes] | None,
        name: str,
        stats: TransportStats,
    ) -> None:
        self.stream = stream
        self._name = name
        self._stats = stats
        self._recorded = False
        self.method = method
        self.context = context
        self._decompress = decompress
        self._buffer = b""
        self._sent_headers = False
        self._task: asyncio.Task[None] | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._requests: _Requests | list[bytes]
        if method.kind == "bidi":
            self._requests = _Requests(method.parse)
            self._start(self._run_bidi(self._requests))
        else:
            self._requests = []

    # ----------------------------------------------------------------- stream events
    def data(self, payload: bytes, end_stream: bool) -> None:
        if payload:
            buffer = self._buffer + payload if self._buffer else payload
            position = 0
            while len(buffer) - position >= 5:
                flag = buffer[position]
                length = int.from_bytes(buffer[position + 1 : position + 5], "big")
                if length > MAX_MESSAGE:
                    self._fail_early(
                        StatusCode.RESOURCE_EXHAUSTED,
                        f"message of {length} octets above {MAX_MESSAGE}",
                    )
                    return
                if len(buffer) - position - 5 < length:
                    break
                message = buffer[position + 5 : position + 5 + length]
                position += 5 + length
                if flag:
                    if self._decompress is None:
                        self._fail_early(
                            StatusCode.INTERNAL, "a compressed message without grpc-encoding"
                        )
                        return
                    try:
                        message = self._decompress(message)
                    except zlib.error as exc:
                        self._fail_early(StatusCode.INTERNAL, f"message does not decompress: {exc}")
                        return
                requests = self._requests
                if isinstance(requests, list):
                    if requests:  # as grpc-java answers a second message of a unary request
                        self._fail_early(StatusCode.INTERNAL, "Too many requests")
                        return
                    requests.append(message)
                elif requests.unread >= MAX_UNREAD:
                    self._fail_early(
                        StatusCode.RESOURCE_EXHAUSTED,
                        f"more than {MAX_UNREAD} request messages not yet read",
                    )
                    return
                else:
                    requests.put(message)
            self._buffer = buffer[position:]
        if end_stream:
            self._ended()

    def _ended(self) -> None:
        if self._buffer:
            self._fail_early(StatusCode.INTERNAL, "the request ends inside a message")
            return
        requests = self._requests
        if not isinstance(requests, list):
            requests.end()
            return
        if not requests:
            self._fail_early(StatusCode.INTERNAL, "Half-closed without a request")
            return
        request = self.method.parse(requests[0])
        kind = self.method.kind
        if kind == "unary_now":
            self._answer_now(request)
        elif kind == "unary":
            self._start(self._run_unary(request))
        else:
            self._start(self._run_stream(request))

    def reset(self) -> None:
        """The client reset the stream, or the connection is gone: the call is cancelled."""
        self._record(StatusCode.CANCELLED)
        self._cancel()

    def _cancel(self) -> None:
        self._cancel_deadline()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _record(self, code: StatusCode) -> None:
        if not self._recorded:
            self._recorded = True
            self._stats.calls[self._name, code] += 1

    # ----------------------------------------------------------------- running
    def _start(self, coroutine: Awaitable[None]) -> None:
        self._task = asyncio.ensure_future(coroutine)

    def set_deadline(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(seconds, self._expired)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.stream.local_closed:
            return
        if self._task is not None:
            self._task.cancel()
        self._finish(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    async def _run_unary(self, request: Any) -> None:
        try:
            response = await self.method.behavior(request, self.context)
            body = self.method.serialize(response)
        except Exception as exc:  # noqa: BLE001 - answers this call only (logged there)
            self._failed(exc)
            return
        self._answer(body)

    def _answer_now(self, request: Any) -> None:
        try:
            body = self.method.serialize(self.method.behavior(request, self.context))
        except Exception as exc:  # noqa: BLE001 - answers this call only (logged there)
            self._failed(exc)
            return
        self._answer(body)

    def _answer(self, body: bytes) -> None:
        stream = self.stream
        if stream.local_closed:
            return
        self._cancel_deadline()
        self._record(StatusCode.OK)
        stream.send_headers(RESPONSE_HEADERS)
        stream.send_data(b"\x00" + len(body).to_bytes(4, "big") + body)
        stream.send_headers(TRAILERS_OK, True)

    async def _run_stream(self, request: Any) -> None:
        await self._respond(self.method.behavior(request, self.context))

    async def _run_bidi(self, requests: _Requests) -> None:
        await self._respond(self.method.behavior(requests, self.context))

    async def _respond(self, responses: AsyncIterator[Any]) -> None:
        stream = self.stream
        serialize = self.method.serialize
        try:
            async for response in responses:
                if stream.local_closed:
                    return
                body = serialize(response)
                if not self._sent_headers:
                    self._sent_headers = True
                    stream.send_headers(RESPONSE_HEADERS)
                stream.send_data(b"\x00" + len(body).to_bytes(4, "big") + body)
        except Exception as exc:  # noqa: BLE001 - answers this call only (logged there)
            self._failed(exc)
            return
        self._finish(StatusCode.OK, "")

    def _failed(self, exc: Exception) -> None:
        if isinstance(exc, Abort):
            self._finish(exc.code, exc.details)
            return
        log.exception("gRPC call %s failed", self.method.behavior)
        self._finish(StatusCode.UNKNOWN, f"Exception calling application: {exc}")

    def _finish(self, code: StatusCode, details: str) -> None:
        self._cancel_deadline()
        stream = self.stream
        if stream.local_closed:
            return
        self._record(code)
        stream.send_headers(status_block(code, details, not self._sent_headers), True)

    def _fail_early(self, code: StatusCode, details: str) -> None:
        """A request that cannot be taken: answered now, whatever the behavior is doing."""
        self._cancel()
        self._finish(code, details)
