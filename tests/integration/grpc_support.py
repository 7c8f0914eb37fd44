"""A gRPC server of test methods on the broker's own HTTP/2 and gRPC
(:mod:`reconsume.wire.h2`), run on an event loop of its own thread, for clients nobody here
wrote: grpcio (tests/integration/test_grpc_transport.py) and grpc-js
(tests/compat/test_grpc_js.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import uvloop

from reconsume.wire.h2.api import Abort, CallContext, Method, StatusCode, unary, unary_now
from reconsume.wire.h2.server import GrpcServer
from reconsume.wire.tls import TlsServerConfig


def same(data: bytes) -> bytes:
    return data


@dataclass
class Seen:
    """What the server's behaviors saw, for the tests to check."""

    cancelled: list[str] = field(default_factory=list)
    finished_streams: list[str] = field(default_factory=list)


def methods(seen: Seen) -> dict[str, Method]:
    async def echo(request: bytes, _context: CallContext) -> bytes:
        return request

    async def whoami(_request: bytes, context: CallContext) -> bytes:
        return f"{context.peer()}|{context.metadata.get('x-test', '')}".encode()

    async def fail(request: bytes, context: CallContext) -> bytes:
        await context.abort(StatusCode.FAILED_PRECONDITION, request.decode())

    async def boom(_request: bytes, _context: CallContext) -> bytes:
        raise RuntimeError("a bug")

    async def slow(_request: bytes, _context: CallContext) -> bytes:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.cancelled.append("slow")
            raise
        return b""

    async def chunks(request: bytes, _context: CallContext) -> AsyncIterator[bytes]:
        count, size = (int(part) for part in request.split(b"x"))
        try:
            for index in range(count):
                yield index.to_bytes(4, "big") * (size // 4)
                if count > 1000:
                    await asyncio.sleep(0.001)
        finally:
            seen.finished_streams.append(request.decode())

    def now(request: bytes, _context: CallContext) -> bytes:
        if request == b"refuse":
            raise Abort(StatusCode.OUT_OF_RANGE, "refused at once")
        return request.upper()

    async def deaf(requests: AsyncIterator[bytes], _context: CallContext) -> AsyncIterator[bytes]:
        await asyncio.sleep(30)  # reads nothing
        yield b""

    async def chat(requests: AsyncIterator[bytes], _context: CallContext) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request[::-1]

    return {
        "/t.T/Echo": unary(echo, same, same),
        "/t.T/WhoAmI": unary(whoami, same, same),
        "/t.T/Fail": unary(fail, same, same),
        "/t.T/Boom": unary(boom, same, same),
        "/t.T/Slow": unary(slow, same, same),
        "/t.T/Now": unary_now(now, same, same),
        "/t.T/Chunks": Method("server_stream", same, same, chunks),
        "/t.T/Chat": Method("bidi", same, same, chat),
        "/t.T/Deaf": Method("bidi", same, same, deaf),
    }


@dataclass
class Running:
    port: int
    seen: Seen
    loop: asyncio.AbstractEventLoop
    server: GrpcServer


@contextlib.contextmanager
def serve(tls: TlsServerConfig | None = None) -> Iterator[Running]:
    """The server on an event loop of its own thread, until the block ends."""
    seen = Seen()
    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = GrpcServer(methods(seen))
    try:
        port = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0, tls), loop).result(10)
        yield Running(port, seen, loop, server)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(0.5), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
