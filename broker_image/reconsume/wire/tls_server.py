"""The listening side of TLS (:mod:`reconsume.wire.tls`): each accepted connection goes to
TLS or plaintext by its first byte, or is refused.

The first byte is *peeked* (``MSG_PEEK``), not read, so the TLS layer still finds the whole
ClientHello; only then is the socket given to the event loop
(``loop.connect_accepted_socket``, with the server's context for TLS). Wrapping an already
reading transport with ``loop.start_tls`` instead would lose the bytes read to sniff. Both
calls are public asyncio API that uvloop implements, so TLS servers run on uvloop as the
others do.

A plaintext connection refused under ``enforcing`` is closed and counted, and logged once per
peer address; a handshake that fails (a wrong certificate, garbage after the 0x16, a client
without the certificate ``required`` asks for) closes that connection only, counted and
logged alike. The certificate,
key and CA files are read again when they change (a renewed cert-manager Secret): a new
connection gets the new context, open ones keep theirs; a file that does not load leaves the
previous context in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from reconsume.errors import InvalidArgumentError
from reconsume.wire.listen import listening_socket, peer_host_port
from reconsume.wire.tls import TlsServerConfig, route_of, server_context

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S = 30.0
"""A connection that sends nothing for this long after connecting is closed."""
HANDSHAKE_TIMEOUT_S = 10.0
RELOAD_CHECK_S = 1.0
"""The certificate files are checked for changes at most this often (on a new connection)."""
LOGGED_PEERS_MAX = 1024
"""Peers whose refusal or failed handshake was logged; past this many the set starts again
(log lines stay bounded)."""


@dataclass
class TlsCounters:
    """What the port accepted and refused since it started."""

    tls: int = 0
    """Connections that completed a TLS handshake."""
    plaintext: int = 0
    """Plaintext connections accepted (``permissive``)."""
    refused_plaintext: int = 0
    """Plaintext connections closed (``enforcing``)."""
    failed_handshakes: int = 0
    reloads: int = 0
    reload_failures: int = 0
    last_reload_failed: bool = False
    """The files last changed into ones that do not load: the previous certificate is still
    the one new connections get (until the files change again)."""


class ServerContext:
    """The server's SSL context, built again when its files change."""

    def __init__(
        self, config: TlsServerConfig, counters: TlsCounters, alpn: tuple[str, ...] = ()
    ) -> None:
        self._config = config
        self._counters = counters
        self._alpn = alpn
        self._stamp = self._files_stamp()
        self._context = self._build()  # a bad file fails the start
        self._checked = time.monotonic()

    def _build(self) -> ssl.SSLContext:
        context = server_context(self._config)
        if self._alpn:
            context.set_alpn_protocols(list(self._alpn))
        return context

    def _files_stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        stamps: list[tuple[int, int, int] | None] = []
        for path in (self._config.cert_file, self._config.key_file, self._config.ca_file):
            try:
                status = os.stat(path) if path else None
            except OSError:
                status = None
            stamps.append(
                None if status is None else (status.st_mtime_ns, status.st_size, status.st_ino)
            )
        return tuple(stamps)

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._checked < RELOAD_CHECK_S:
            return self._context
        self._checked = now
        stamp = self._files_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._context = self._build()
            except InvalidArgumentError as exc:
                self._counters.reload_failures += 1
                self._counters.last_reload_failed = True
                log.warning("TLS files changed but do not load, keeping the previous: %s", exc)
            else:
                self._counters.reloads += 1
                self._counters.last_reload_failed = False
                log.info("TLS certificate %s read again", self._config.cert_file)
        return self._context


def bind(host: str, port: int) -> list[socket.socket]:
    """The listening socket on ``host:port`` (:func:`reconsume.wire.listen.listening_socket`)."""
    return [listening_socket(host, port)]


async def peek(sock: socket.socket) -> bytes:
    """The first byte waiting on ``sock``, left there; b"" when the peer closed first."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        readable: asyncio.Future[None] = loop.create_future()

        def ready(future: asyncio.Future[None] = readable) -> None:
            if not future.done():
                future.set_result(None)

        fd = sock.fileno()
        loop.add_reader(fd, ready)
        try:
            await readable
        finally:
            loop.remove_reader(fd)


class TlsListener:
    """Accepts on a server's port and hands each connection to ``protocol_factory``'s
    protocol, over TLS or not as :func:`~reconsume.wire.tls.route_of` decides."""

    def __init__(
        self,
        config: TlsServerConfig,
        protocol_factory: Callable[[], asyncio.Protocol],
        name: str,
        alpn: tuple[str, ...] = (),
    ) -> None:
        """``alpn``: the application protocols offered in the handshake (gRPC's ``h2``)."""
        self.config = config
        self._alpn = alpn
        self.counters = TlsCounters()
        self._context: ServerContext | None = None
        self._factory = protocol_factory
        self._name = name
        self._sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._handing: set[asyncio.Task[None]] = set()
        self._logged: set[tuple[str, str]] = set()

    def start(self, host: str, port: int, *, start_serving: bool = True) -> int:
        """Bind (port 0 picks one) and return the port; accept now or at
        :meth:`start_serving`. Files that do not load raise InvalidArgumentError first."""
        self._context = ServerContext(self.config, self.counters, self._alpn)
        self._sockets = bind(host, port)
        if start_serving:
            self.start_serving()
        return int(self._sockets[0].getsockname()[1])

    def start_serving(self) -> None:
        if self._accepting:
            return
        for listening in self._sockets:
            self._accepting.append(asyncio.create_task(self._accept_forever(listening)))

    async def _accept_forever(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _address = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors: wait, the backlog keeps the rest
                log.warning("%s: accept failed: %s", self._name, exc)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            task = asyncio.create_task(self._hand_over(sock))
            self._handing.add(task)
            task.add_done_callback(self._handing.discard)

    async def _hand_over(self, sock: socket.socket) -> None:
        handed = False
        try:
            handed = await self._route(sock)
        finally:
            if not handed:
                sock.close()

    async def _route(self, sock: socket.socket) -> bool:
        """Give ``sock`` to the loop (True) or leave it to be closed (False)."""
        peer = _peer_host(sock)
        try:
            async with asyncio.timeout(FIRST_BYTE_TIMEOUT_S):
                first = await peek(sock)
        except (OSError, TimeoutError):
            return False
        if not first:
            return False
        route = route_of(first, self.config.mode)
        if route == "refuse":
            self._refuse(peer)
            return False
        loop = asyncio.get_running_loop()
        if route == "plaintext":
            try:
                await loop.connect_accepted_socket(self._factory, sock)
            except OSError:  # the peer left already
                return False
            self.counters.plaintext += 1
            return True
        assert self._context is not None  # started
        made: list[asyncio.Protocol] = []

        def protocol() -> asyncio.Protocol:
            made.append(self._factory())
            return made[-1]

        try:
            await loop.connect_accepted_socket(
                protocol,
                sock,
                ssl=self._context.current(),
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        except BaseException as exc:
            # The protocol was made before the handshake and will hear nothing more: it is
            # told the connection is lost, so that whoever keeps it (the server's set of
            # connections) lets it go.
            for unused in made:
                unused.connection_lost(exc if isinstance(exc, Exception) else None)
            if not isinstance(exc, OSError | TimeoutError):  # ssl.SSLError is an OSError
                raise
            self.counters.failed_handshakes += 1
            if self._first_time("handshake", peer):
                log.warning(
                    "%s: TLS handshake with %s failed: %s (logged once per peer address)",
                    self._name,
                    peer,
                    exc,
                )
            return False
        self.counters.tls += 1
        return True

    def _refuse(self, peer: str) -> None:
        self.counters.refused_plaintext += 1
        if self._first_time("plaintext", peer):
            log.warning(
                "%s: closed a plaintext connection from %s: TLS is enforced "
                "(logged once per peer address)",
                self._name,
                peer,
            )

    def _first_time(self, kind: str, peer: str) -> bool:
        """Whether ``kind`` of trouble with ``peer`` is new (to be logged)."""
        key = (kind, peer)
        if key in self._logged:
            return False
        if len(self._logged) >= LOGGED_PEERS_MAX:
            self._logged.clear()
        self._logged.add(key)
        return True

    def close(self) -> None:
        """Stop accepting; connections being sniffed are closed."""
        for task in (*self._accepting, *self._handing):
            task.cancel()
        self._accepting.clear()
        for sock in self._sockets:
            sock.close()

    async def wait_closed(self) -> None:
        for task in list(self._handing):
            with contextlib.suppress(BaseException):
                await task


def _peer_host(sock: socket.socket) -> str:
    try:
        peer = peer_host_port(sock.getpeername())
    except OSError:
        return "?"
    return "?" if peer is None else peer[0]
