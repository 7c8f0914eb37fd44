"""The ends that make connections: a :class:`RemotingServer` accepts them and answers their
requests through one dispatcher, a :class:`RemotingClient` opens one per address and sends
requests over it, signed with its credentials. Each connection is a
:class:`~reconsume.wire.transport.Connection`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Literal

from reconsume.errors import RemotingConnectError
from reconsume.wire.command import RemotingCommand
from reconsume.wire.credential_files import environment_signer
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.frame import MAX_FRAME_BYTES
from reconsume.wire.listen import bound_port, create_server
from reconsume.wire.side_listener import SideListener
from reconsume.wire.tls import ClientTls, TlsServerConfig, tls_from_environment
from reconsume.wire.tls_server import TlsListener
from reconsume.wire.transport import Connection

Signer = Callable[[RemotingCommand], None]
"""Signs a request in place just before it is written (a client's credentials)."""


class RemotingServer:
    """Accepts connections and answers their requests through one dispatcher; with ``tls``
    in a mode other than disabled, over TLS (:mod:`reconsume.wire.tls_server`)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        tls: TlsServerConfig | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self._max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self.tls: TlsListener | None = None
        """Accepts instead of an asyncio server when TLS is on (its counters)."""
        self._tls_config = tls if tls is not None and tls.enabled else None
        if self._tls_config is not None:
            self.tls = TlsListener(self._tls_config, self._new_connection, dispatcher.name)
        self.connections: set[Connection] = set()
        self.on_disconnect: list[Callable[[Connection], None]] = []
        self._sides: set[SideListener[Connection]] = set()

    async def listen_also(self, host: str, port: int) -> SideListener[Connection]:
        """Listen on another port as well (0 picks one): its connections are this server's
        (same dispatcher, frame limit and TLS, in :attr:`connections`, told to
        :attr:`on_disconnect`), and :meth:`SideListener.close` stops it and ends them. The
        port is bound when this returns, and nothing is awaited after binding: a caller
        cancelled meanwhile leaves no listener behind that it does not hold. Connections are
        taken from :meth:`SideListener.start_serving` on."""
        side = SideListener(self._sides, self._new_connection, _end)
        await side.bind(host, port, self._tls_config, f"{self.dispatcher.name}-side", ())
        return side

    async def start(self, host: str, port: int, *, start_serving: bool = True) -> int:
        """Listen on ``host:port`` (port 0 picks one); returns the port. With
        ``start_serving=False`` the port is bound but connections wait in the backlog until
        :meth:`start_serving`."""
        if self.tls is not None:
            return self.tls.start(host, port, start_serving=start_serving)
        self._server = await create_server(
            self._new_connection, host, port, start_serving=start_serving
        )
        return bound_port(self._server)

    async def start_serving(self) -> None:
        if self.tls is not None:
            self.tls.start_serving()
        if self._server is not None:
            await self._server.start_serving()

    def _new_connection(self) -> Connection:
        connection = Connection(
            self.dispatcher, max_frame_bytes=self._max_frame_bytes, on_close=self._closed
        )
        self.connections.add(connection)
        return connection

    def _closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        for side in self._sides:
            side.connections.discard(connection)
        for callback in self.on_disconnect:
            callback(connection)

    def stop_accepting(self) -> None:
        if self.tls is not None:
            self.tls.close()
        if self._server is not None:
            self._server.close()

    async def stop(self) -> None:
        """Stop accepting and close every connection."""
        for side in list(self._sides):
            await side.close()
        self.stop_accepting()
        if self.tls is not None:  # connections in their handshake first
            await self.tls.wait_closed()
        for connection in list(self.connections):
            await connection.aclose()
        if self._server is not None:
            await self._server.wait_closed()


async def _end(connection: Connection) -> None:
    await connection.aclose()


class RemotingClient:
    """One connection per address, opened on first use and reopened after it drops."""

    def __init__(
        self,
        dispatcher: Dispatcher | None = None,
        *,
        connect_timeout_s: float = 3.0,
        signer: Signer | Literal["environment"] | None = "environment",
        tls: ClientTls = "environment",
    ) -> None:
        self.dispatcher = dispatcher or Dispatcher("client")
        if isinstance(signer, str):
            signer = environment_signer()
        self.signer: Signer | None = signer
        """Signs every request this client sends (its credentials); None: unsigned. By
        default the credentials of the environment (the files of ``RECONSUME_CREDENTIALS_DIR``,
        else ``RECONSUME_ACCESS_KEY`` and ``RECONSUME_SECRET_KEY``), when set: every client of
        a process signs with them."""
        self.tls: ssl.SSLContext | None = tls_from_environment() if isinstance(tls, str) else tls
        """The context connections are opened with; None: plaintext. By default what
        ``RECONSUME_TLS`` and its files say (:func:`reconsume.wire.tls.tls_from_environment`)."""
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self.unreachable: set[str] = set()
        """Addresses whose last connection attempt failed (a broker gone: its route may
        have changed)."""

    async def connection(self, address: str) -> Connection:
        existing = self._connections.get(address)
        if existing is not None and existing.is_open:
            return existing
        pending = self._connecting.get(address)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._connecting[address] = future
        try:
            connection = await self._open(address)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: other waiters re-raise it
            raise
        finally:
            self._connecting.pop(address, None)
        self._connections[address] = connection
        future.set_result(connection)
        return connection

    async def _open(self, address: str) -> Connection:
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise RemotingConnectError(f"address {address!r} is not host:port")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _transport, connection = await loop.create_connection(
                    lambda: Connection(self.dispatcher), host.strip("[]"), int(port), ssl=self.tls
                )
        except (OSError, TimeoutError) as exc:
            self.unreachable.add(address)
            raise RemotingConnectError(f"cannot connect to {address}: {exc}") from exc
        self.unreachable.discard(address)
        return connection

    async def invoke(
        self, address: str, request: RemotingCommand, timeout_s: float = 3.0
    ) -> RemotingCommand:
        connection = await self.connection(address)
        if self.signer is not None:
            self.signer(request)
        return await connection.invoke(request, timeout_s)

    async def send_oneway(self, address: str, request: RemotingCommand) -> None:
        connection = await self.connection(address)
        if self.signer is not None:
            self.signer(request)
        connection.send(request)

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            await connection.aclose()
        self._connections.clear()
