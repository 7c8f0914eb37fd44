"""A server's other port: bound beside its own, its connections the server's, and closed
with them (a replicated broker's master ports, for the remoting server and the gRPC server)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from reconsume.wire.listen import bound_port, create_server
from reconsume.wire.tls import TlsServerConfig
from reconsume.wire.tls_server import TlsListener

C = TypeVar("C", bound=asyncio.Protocol)


class SideListener(Generic[C]):
    """Accepts on another port into ``new_connection`` (the owner's connections) and, once
    :meth:`close`\\ d, ends those it accepted with ``end``."""

    def __init__(
        self,
        sides: set[SideListener[C]],
        new_connection: Callable[[], C],
        end: Callable[[C], Awaitable[None]],
    ) -> None:
        """``sides``: the owner's open side listeners, this one among them until closed."""
        self._sides = sides
        self._new_connection = new_connection
        self._end = end
        self.port = 0
        self.server: asyncio.Server | None = None
        self.tls: TlsListener | None = None
        self.connections: set[C] = set()
        """Open connections accepted on this port (the owner discards those that close)."""

    def _accept(self) -> C:
        connection = self._new_connection()
        self.connections.add(connection)
        return connection

    async def bind(
        self, host: str, port: int, tls: TlsServerConfig | None, name: str, alpn: tuple[str, ...]
    ) -> None:
        """Bind ``host:port`` (0 picks one), TLS as ``tls`` says when it is on: connections
        wait in the backlog until :meth:`start_serving`. Nothing is awaited after binding, so
        a caller cancelled meanwhile leaves no port bound that it does not hold."""
        if tls is not None and tls.enabled:
            self.tls = TlsListener(tls, self._accept, name, alpn=alpn)
            self.port = self.tls.start(host, port, start_serving=False)
        else:
            self.server = await create_server(self._accept, host, port, start_serving=False)
            self.port = bound_port(self.server)
        self._sides.add(self)

    async def start_serving(self) -> None:
        if self.tls is not None:
            self.tls.start_serving()
        if self.server is not None:
            await self.server.start_serving()

    async def close(self) -> None:
        """Stop accepting and end every connection accepted here."""
        self._sides.discard(self)
        if self.tls is not None:
            self.tls.close()
            await self.tls.wait_closed()
        if self.server is not None:
            self.server.close()
        connections, self.connections = self.connections, set()
        for connection in connections:
            await self._end(connection)
        if self.server is not None:
            await self.server.wait_closed()
