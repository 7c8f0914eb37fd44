"""A small HTTP/1.1 server on the broker's event loop, for ``/metrics`` and the health probes.

It serves GET and HEAD of a fixed set of paths, each answered by a synchronous function; any
other path is 404 and any other method 405. Connections are kept alive as HTTP/1.1 allows. A
request that does not parse is answered 400 and its connection closed; a request head larger
than :data:`MAX_HEAD_BYTES`, or not complete within :data:`IDLE_TIMEOUT_S`, closes its
connection without an answer. Nothing a client sends affects another connection.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus

from reconsume.wire.listen import bound_port, listening_socket

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8 * 1024
"""Request line and headers together, at most."""
MAX_HEADERS = 64
IDLE_TIMEOUT_S = 30.0
"""Seconds a connection may take to send a request head (also the keep-alive idle limit)."""
METHODS = ("GET", "HEAD")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TARGET = re.compile(r"/[\x21-\x7e]*")
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    """The target without its query string."""
    version: str
    headers: Mapping[str, str] = field(default_factory=dict)
    """Header names lower-cased."""

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may serve another request after this one."""
        if self.version != "HTTP/1.1" or "close" in self.headers.get("connection", "").lower():
            return False
        # Bodies are never read: after a request with one the connection cannot be reused.
        return "transfer-encoding" not in self.headers and self.headers.get(
            "content-length", "0"
        ) in ("", "0")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = TEXT
    headers: Mapping[str, str] = field(default_factory=dict)


Route = Callable[[Request], Response]


def parse_request_head(head: bytes) -> Request | None:
    """The request of ``head`` (request line and headers, ending with an empty line), or
    None when it is not valid HTTP/1.x."""
    lines = head.decode("latin-1").split("\r\n")
    if len(lines) < 3 or lines[-2:] != ["", ""] or len(lines) - 3 > MAX_HEADERS:
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    method, target, version = parts
    if not _TOKEN.fullmatch(method) or version not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    if not _TARGET.fullmatch(target):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:-2]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            return None
        headers[name.lower()] = value.strip(" \t")
    length = headers.get("content-length")
    if length is not None and not (length.isascii() and length.isdigit()):
        return None
    path = target.split("?", 1)[0].split("#", 1)[0]
    return Request(method, path, version, headers)


def render(response: Response, *, keep_alive: bool, head_only: bool) -> bytes:
    """The bytes of ``response`` (status line, headers, body unless ``head_only``)."""
    status = HTTPStatus(response.status)
    lines = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        *(f"{name}: {value}" for name, value in response.headers.items()),
    ]
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


def text(status: int, body: str) -> Response:
    return Response(status, (body + "\n").encode())


class HttpEndpoint:
    """Serves ``routes`` (path -> function) until :meth:`stop`."""

    def __init__(self, routes: Mapping[str, Route]) -> None:
        self.routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (port 0 picks one); returns the port."""
        sock = listening_socket(host, port)
        try:
            self._server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEAD_BYTES)
        except BaseException:
            sock.close()
            raise
        return bound_port(self._server)

    def answer(self, request: Request) -> Response:
        route = self.routes.get(request.path)
        if route is None:
            return text(404, f"no such path: {request.path}")
        if request.method not in METHODS:
            return Response(405, b"method not allowed\n", headers={"Allow": ", ".join(METHODS)})
        try:
            return route(request)
        except Exception:  # one failing route must not take the endpoint down
            log.exception("HTTP %s %s failed", request.method, request.path)
            return text(500, "internal error")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT_S):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                    return
                request = parse_request_head(head)
                if request is None:
                    peer = writer.get_extra_info("peername")
                    log.info("HTTP: malformed request from %s, closing", peer)
                    bad = text(400, "bad request")
                    writer.write(render(bad, keep_alive=False, head_only=False))
                    await writer.drain()
                    return
                keep_alive = request.keep_alive
                response = self.answer(request)
                head_only = request.method == "HEAD"
                writer.write(render(response, keep_alive=keep_alive, head_only=head_only))
                await writer.drain()
                if not keep_alive:
                    return
        except ConnectionError:
            return
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def stop(self) -> None:
        """Stop accepting and close every connection."""
        if self._server is None:
            return
        self._server.close()
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
