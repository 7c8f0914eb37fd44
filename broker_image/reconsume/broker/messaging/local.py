"""Remoting requests the gRPC service makes of its own broker, in process.

A :class:`LocalConnection` is a :class:`~reconsume.wire.transport.Connection` without a
socket: :meth:`LocalConnection.request` runs a request through the broker's dispatcher (its
handler, as if a 4.x client had sent it; access was checked by the gRPC service) and returns
the answer the handler gives, now or later (a send under Sync flush or Sync replication is
answered when it counts as stored). Records keep the gRPC client's address as born host.

The service keeps one connection per gRPC client address (:class:`LocalConnections`), not one
per call: a connection caches what it parsed of its peer (the born host), and building one
costs as much as the rest of a send's own work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from reconsume.errors import RemotingTimeoutError
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.transport import Connection


class _NoSocket:
    """What a Connection asks of its transport, for a connection that has none."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self._peer = peer
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._peer if name == "peername" else default

    def is_closing(self) -> bool:
        return self._closing

    def write(self, data: bytes) -> None:  # nothing is written: answers go to send()
        pass

    def close(self) -> None:
        self._closing = True


class LocalConnection(Connection):
    """A gRPC client's way into the broker's handlers; any number of its calls at once."""

    answers_as_frames = False
    """Answers are taken in as commands (:meth:`send`): a waiting write's answer is built when
    it is released, not encoded ahead."""

    def __init__(self, dispatcher: Dispatcher, peer: tuple[str, int]) -> None:
        super().__init__(dispatcher)
        self._answers: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.connection_made(_NoSocket(peer))  # type: ignore[arg-type]

    def send(self, command: RemotingCommand) -> None:
        """Take a handler's answer in. Requests the broker sends to its clients' connections
        (NOTIFY_CONSUMER_IDS_CHANGED) do not come here: no consumer registers through one."""
        future = self._answers.pop(command.opaque, None)
        if future is not None and not future.done():
            future.set_result(command)

    async def request(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """The broker's answer to ``request``, whose access the gRPC service checked (its
        clients sign differently: :mod:`.auth`)."""
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._answers[request.opaque] = future
        try:
            self.serve(request, checked=True)
            if future.done():  # answered at once (Async flush): no timer, no loop turn
                return future.result()
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError as exc:
            raise RemotingTimeoutError(
                f"{request.describe()}: no answer from the broker within {timeout_s:g}s"
            ) from exc
        finally:
            self._answers.pop(request.opaque, None)


class LocalConnections:
    """One :class:`LocalConnection` per gRPC peer (``ipv4:host:port``). gRPC does not say when
    a client's connection ends, so past ``limit`` peers the table starts over; a call under
    way keeps the connection it took."""

    def __init__(self, dispatcher: Dispatcher, limit: int = 4096) -> None:
        self._dispatcher = dispatcher
        self._limit = limit
        self._by_peer: dict[str, LocalConnection] = {}

    def of(self, grpc_peer: str) -> LocalConnection:
        connection = self._by_peer.get(grpc_peer)
        if connection is None:
            if len(self._by_peer) >= self._limit:
                self._by_peer.clear()
            connection = LocalConnection(self._dispatcher, peer_of(grpc_peer))
            self._by_peer[grpc_peer] = connection
        return connection

    def __len__(self) -> int:
        return len(self._by_peer)


def peer_of(grpc_peer: str) -> tuple[str, int]:
    """``(host, port)`` of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); the
    unknown address for anything else (a Unix socket)."""
    scheme, _, rest = grpc_peer.partition(":")
    if scheme not in ("ipv4", "ipv6"):
        return ("0.0.0.0", 0)
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    return (host or "0.0.0.0", int(port) if port.isdigit() else 0)
