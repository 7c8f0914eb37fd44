"""One benchmark client process, driven over stdin/stdout by ``bench.client_throughput``.

    python -m bench.client_worker produce --namesrv ADDR --topic T [--warmup-sends N]
    python -m bench.client_worker consume --namesrv ADDR --topic T --total N \
        --warmup-topic W --warmup-total M

Each warms up first (sends, or drains the warm-up topic with a throw-away group), prints one
JSON line ``{"ready": ...}`` and then answers one JSON line per command line it reads:

* produce: ``{"start_at": t0, "end_at": t1}`` (``time.monotonic()`` values, the same clock in
  every process on Linux): wait until ``t0``, send one message at a time (one request in
  flight, like a Java producer thread doing sync sends) until ``t1``; answer the number of
  sends, when the first began and the last ended, and every send's latency in µs.
* consume: ``{"group": G}``: a new PushConsumer of group ``G`` (clustering, from the first
  offset, an async listener that only counts, default pull batch 32) drains the topic; the
  clock runs from ``start()`` until the listener has seen ``total`` messages.

* echo-server / echo: the floor of a request-response over loopback on this machine, without
  reconsume: a uvloop client sends a send-sized request and awaits a response-sized answer
  from a uvloop server that does nothing else, one in flight, timed like produce.

An empty line or end of input ends the process.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from reconsume.client.listener import ConcurrentContext, ConsumeFrom, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.message.model import Message, StoredMessage

TAGS = "TagA"


def event_loop_name() -> str:
    try:
        return f"uvloop {importlib.metadata.version('uvloop')}"
    except importlib.metadata.PackageNotFoundError:
        return "asyncio"


def _run(main: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.install()  # what the broker runs on too (reconsume.runtime)
        asyncio.run(main)


def _answer(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


async def _command() -> dict[str, Any] | None:
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return json.loads(line) if line.strip() else None


# ---------------------------------------------------------------------------- produce
async def _timed(send_one: Callable[[], Awaitable[object]]) -> None:
    """Answer each run command: ``send_one()`` back to back from start_at until end_at."""
    while (command := await _command()) is not None:
        clock = time.perf_counter
        latencies: list[int] = []
        record = latencies.append
        await asyncio.sleep(max(0.0, command["start_at"] - time.monotonic()))
        end_at = command["end_at"]
        cpu = time.process_time()
        started = time.monotonic()
        while time.monotonic() < end_at:
            began = clock()
            await send_one()
            record(int((clock() - began) * 1e6))
        ended = time.monotonic()
        _answer(
            {
                "sends": len(latencies),
                "started": started,
                "ended": ended,
                "cpu_seconds": time.process_time() - cpu,
                "latencies_us": latencies,
            }
        )


def _body(size: int) -> bytes:
    return (os.urandom(64) * (size // 64 + 1))[:size]


async def produce(args: argparse.Namespace) -> None:
    body = _body(args.body_bytes)
    topic = args.topic
    async with Producer([args.namesrv], args.group) as producer:
        send = producer.send

        def send_one() -> Awaitable[object]:
            return send(Message(topic, body, {"TAGS": TAGS}))

        for _ in range(args.warmup_sends):
            await send_one()
        _answer({"ready": True, "pid": os.getpid()})
        await _timed(send_one)


# ---------------------------------------------------------------------------- floor
ECHO_REPLY_BYTES = 300
"""About a send response's frame; the request is the body plus ECHO_HEADER_BYTES."""
ECHO_HEADER_BYTES = 300


class _EchoServer(asyncio.Protocol):
    """Answers every ``request_bytes`` received with ECHO_REPLY_BYTES, nothing else."""

    def __init__(self, request_bytes: int) -> None:
        self._request = request_bytes
        self._pending = 0
        self._reply = b"r" * ECHO_REPLY_BYTES
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._pending += len(data)
        while self._pending >= self._request and self._transport is not None:
            self._pending -= self._request
            self._transport.write(self._reply)


class _EchoClient(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self._pending = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._pending += len(data)
        if self._pending >= ECHO_REPLY_BYTES and self.waiter is not None:
            self._pending -= ECHO_REPLY_BYTES
            self.waiter.set_result(None)


async def echo_server(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    request_bytes = args.body_bytes + ECHO_HEADER_BYTES
    server = await loop.create_server(lambda: _EchoServer(request_bytes), "127.0.0.1", 0)
    _answer({"ready": True, "pid": os.getpid(), "port": server.sockets[0].getsockname()[1]})
    await _command()  # until end of input
    server.close()


async def echo(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    request = _body(args.body_bytes + ECHO_HEADER_BYTES)
    _transport, client = await loop.create_connection(_EchoClient, "127.0.0.1", args.port)

    async def send_one() -> None:
        client.waiter = loop.create_future()
        assert client.transport is not None
        client.transport.write(request)
        await client.waiter

    for _ in range(args.warmup_sends):
        await send_one()
    _answer({"ready": True, "pid": os.getpid()})
    await _timed(send_one)


# ---------------------------------------------------------------------------- consume
async def _drain(namesrv: str, topic: str, group: str, total: int) -> dict[str, Any]:
    """Consume ``total`` messages of ``topic`` with a new group; how long it took."""
    done = asyncio.Event()
    seen = [0]

    async def listener(messages: list[StoredMessage], _context: ConcurrentContext) -> ConsumeStatus:
        seen[0] += len(messages)
        if seen[0] >= total:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    settings = ConsumerSettings(consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer = PushConsumer([namesrv], group, settings=settings)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    cpu = time.process_time()
    started = time.perf_counter()
    try:
        await consumer.start()
        start_seconds = time.perf_counter() - started
        await done.wait()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        await consumer.shutdown()
    return {
        "consumed": seen[0],
        "seconds": seconds,
        "start_seconds": start_seconds,
        "cpu_seconds": cpu,
    }


async def consume(args: argparse.Namespace) -> None:
    if args.warmup_total > 0:
        await _drain(
            args.namesrv, args.warmup_topic, f"bench-warmup-{os.getpid()}", args.warmup_total
        )
    _answer({"ready": True, "pid": os.getpid()})
    while (command := await _command()) is not None:
        _answer(await _drain(args.namesrv, args.topic, command["group"], args.total))


_MODES: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, None]]] = {
    "produce": produce,
    "consume": consume,
    "echo-server": echo_server,
    "echo": echo,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.client_worker")
    parser.add_argument("mode", choices=sorted(_MODES))
    parser.add_argument("--namesrv", default="")
    parser.add_argument("--topic", default="")
    parser.add_argument("--port", type=int, default=0, help="echo: the echo server's port")
    parser.add_argument("--group", default="bench-producer")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--warmup-sends", type=int, default=500)
    parser.add_argument("--total", type=int, default=0, help="messages to consume")
    parser.add_argument("--warmup-topic", default="")
    parser.add_argument("--warmup-total", type=int, default=0)
    args = parser.parse_args(argv)
    _run(_MODES[args.mode](args))


if __name__ == "__main__":
    main()
