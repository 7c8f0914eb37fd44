"""What a gRPC method's behavior sees of the server: its :class:`Method` declaration, the
:class:`CallContext` of each call, and the status codes it may end a call with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal, NoReturn


class StatusCode(IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Abort(Exception):
    """Ends a call with ``code`` and ``details`` (raised by :meth:`CallContext.abort`)."""

    def __init__(self, code: StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class CallContext:
    """What a behavior may ask of its call."""

    __slots__ = ("_peer", "metadata")

    def __init__(self, peer: str, metadata: dict[str, str]) -> None:
        self._peer = peer
        self.metadata = metadata
        """The request's headers other than the pseudo-headers, by name (lower case)."""

    def peer(self) -> str:
        """``ipv4:host:port`` or ``ipv6:[host]:port``."""
        return self._peer

    async def abort(self, code: StatusCode, details: str) -> NoReturn:
        raise Abort(code, details)


Kind = Literal["unary", "unary_now", "server_stream", "bidi"]


@dataclass(frozen=True)
class Method:
    kind: Kind
    parse: Callable[[bytes], Any]
    serialize: Callable[[Any], bytes]
    behavior: Callable[..., Any]
    """unary: ``async (request, context) -> response``; unary_now: ``(request, context) ->
    response``, a plain function answered in the turn of the loop its request completes (no
    task, no timer: for work that never waits); server_stream: ``(request, context) ->
    AsyncIterator[response]``; bidi: ``(AsyncIterator[request], context) ->
    AsyncIterator[response]``."""


def unary(
    behavior: Callable[[Any, CallContext], Awaitable[Any]],
    parse: Callable[[bytes], Any],
    serialize: Callable[[Any], bytes],
) -> Method:
    return Method("unary", parse, serialize, behavior)


def unary_now(
    behavior: Callable[[Any, CallContext], Any],
    parse: Callable[[bytes], Any],
    serialize: Callable[[Any], bytes],
) -> Method:
    return Method("unary_now", parse, serialize, behavior)
