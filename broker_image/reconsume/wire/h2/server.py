"""The listening side of the gRPC server: plaintext, or TLS only (ALPN ``h2``) through
:class:`~reconsume.wire.tls_server.TlsListener` with its certificate reloading; another port
beside the first whose connections end with it (a replicated broker's master port); and the
orderly stop (GOAWAY, the open calls given ``grace_s`` to finish)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping

from reconsume.errors import InvalidArgumentError
from reconsume.wire.h2.api import Method
from reconsume.wire.h2.connection import H2Connection
from reconsume.wire.h2.frames import DEFAULT_LIMITS, NO_ERROR, Limits
from reconsume.wire.h2.router import Router
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.listen import bound_port, create_server, listen_text
from reconsume.wire.side_listener import SideListener
from reconsume.wire.tls import TlsMode, TlsServerConfig
from reconsume.wire.tls_server import TlsListener

ALPN = ("h2",)


class GrpcServer:
    """Serves ``methods`` (by path, ``/package.Service/Method``) on one port."""

    def __init__(self, methods: Mapping[str, Method], limits: Limits = DEFAULT_LIMITS) -> None:
        self.stats = TransportStats()
        self.router = Router(methods, self.stats)
        self.limits = limits
        self.connections: set[H2Connection] = set()
        self._idle: asyncio.Event | None = None
        """Set when the last connection closes, while :meth:`stop` waits for it."""
        self._server: asyncio.Server | None = None
        self.tls: TlsListener | None = None
        self._sides: set[SideListener[H2Connection]] = set()

    def _connection(self) -> H2Connection:
        connection = H2Connection(self.router, self.limits, self._closed, self.stats)
        self.connections.add(connection)
        self.stats.accepted_connections += 1
        self.stats.open_connections = len(self.connections)
        return connection

    def _closed(self, connection: H2Connection) -> None:
        self.connections.discard(connection)
        for side in self._sides:
            side.connections.discard(connection)
        self.stats.open_connections = len(self.connections)
        if not self.connections and self._idle is not None:
            self._idle.set()

    async def start(self, host: str, port: int, tls: TlsServerConfig | None = None) -> int:
        """Listen on ``host:port`` (0 picks a port), TLS only when ``tls`` is on; the port."""
        try:
            if tls is not None and tls.enabled:
                only_tls = dataclasses.replace(tls, mode=TlsMode.ENFORCING)
                self.tls = TlsListener(only_tls, self._connection, "gRPC", alpn=ALPN)
                return self.tls.start(host, port)
            self._server = await create_server(self._connection, host, port)
        except OSError as exc:
            raise InvalidArgumentError(
                f"grpc_listen: cannot listen on {listen_text(host, port)}: {exc}"
            ) from exc
        return bound_port(self._server)

    async def listen_also(
        self, host: str, port: int, tls: TlsServerConfig | None = None
    ) -> SideListener[H2Connection]:
        """Listen on another port as well (0 picks one), TLS only when ``tls`` is on: its
        connections are this server's (the same methods, limits and counters), and
        :meth:`SideListener.close` stops it and ends them (GOAWAY, no grace). Bound when this
        returns; connections are taken from :meth:`SideListener.start_serving` on."""
        side = SideListener(self._sides, self._connection, _end)
        only_tls = None
        if tls is not None and tls.enabled:
            only_tls = dataclasses.replace(tls, mode=TlsMode.ENFORCING)
        await side.bind(host, port, only_tls, "gRPC-side", ALPN)
        return side

    async def stop(self, grace_s: float = 1.0) -> None:
        """Stop accepting, let open calls finish for up to ``grace_s``, then close."""
        for side in list(self._sides):
            await side.close()
        if self._server is not None:
            self._server.close()
        if self.tls is not None:
            self.tls.close()
        self._idle = asyncio.Event()
        for connection in list(self.connections):
            connection.go_away()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace_s):
                    await self._idle.wait()
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self.tls is not None:
            await self.tls.wait_closed()
            self.tls = None


async def _end(connection: H2Connection) -> None:
    """A side port's connection closed at once (GOAWAY, no grace: its client connects again,
    and is taken elsewhere)."""
    connection.close(NO_ERROR, "this port closed")
