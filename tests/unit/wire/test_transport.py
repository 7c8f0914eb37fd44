"""The asyncio transport over real loopback sockets: requests both ways, oneway requests,
handler failures, timeouts, refused connections, and bad frames closing only their
connection. Each test runs its own event loop with asyncio.run and waits on conditions with
deadlines, never on fixed sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from reconsume.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from reconsume.wire.codes import RequestCode, ResponseCode, SerializeType
from reconsume.wire.command import FLAG_RESPONSE, RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.frame import MAX_FRAME_BYTES, decode_frame, encode_frame
from reconsume.wire.transport import Connection
from tests.polling import eventually_async
from tests.unit.wire.test_frame_golden import frame_of

ECHO = RequestCode.HEART_BEAT
SLOW = RequestCode.QUERY_MESSAGE
DEADLINE_S = 10.0
KINDS = pytest.mark.parametrize("kind", list(SerializeType), ids=lambda k: k.name)


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


def echo(request: RemotingCommand, connection: Connection) -> RemotingCommand:
    return request.respond(
        ResponseCode.SUCCESS,
        remark=f"echo from {connection.peer}",
        ext_fields={**request.ext_fields, "seen": "yes"},
        body=request.body[::-1],
    )


def server_dispatcher() -> Dispatcher:
    dispatcher = Dispatcher("test-server")
    dispatcher.register(ECHO, echo)
    return dispatcher


@contextlib.asynccontextmanager
async def serving(
    dispatcher: Dispatcher | None = None,
) -> AsyncIterator[tuple[RemotingServer, str]]:
    server = RemotingServer(dispatcher or server_dispatcher())
    port = await server.start("127.0.0.1", 0)
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def client(dispatcher: Dispatcher | None = None) -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient(dispatcher)
    try:
        yield remoting
    finally:
        await remoting.close()


@contextlib.asynccontextmanager
async def raw(address: str) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def read_command(reader: asyncio.StreamReader) -> RemotingCommand:
    prefix = await asyncio.wait_for(reader.readexactly(4), DEADLINE_S)
    rest = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", prefix)[0]), DEADLINE_S)
    return decode_frame(prefix + rest)


async def assert_still_serving(address: str) -> None:
    async with client() as other:
        response = await other.invoke(address, RemotingCommand.request(ECHO, body=b"ab"))
    assert response.code == ResponseCode.SUCCESS
    assert response.body == b"ba"


# ---------------------------------------------------------------------------- round trips
@KINDS
def test_invoke_round_trip(kind: SerializeType) -> None:
    async def main() -> None:
        async with serving() as (_server, address), client() as remoting:
            request = RemotingCommand.request(
                ECHO, {"k": "v", "ключ": "値"}, b"hello", serialize_type=kind
            )
            response = await remoting.invoke(address, request, timeout_s=DEADLINE_S)
            assert response.is_response
            assert response.opaque == request.opaque
            assert response.serialize_type is kind
            assert response.code == ResponseCode.SUCCESS
            assert response.ext_fields == {"k": "v", "ключ": "値", "seen": "yes"}
            assert response.body == b"olleh"
            assert response.remark is not None
            assert response.remark.startswith("echo from 127.0.0.1:")
            # the connection is reused
            again = await remoting.invoke(address, RemotingCommand.request(ECHO, body=b"xy"))
            assert again.body == b"yx"
            assert len(_server.connections) == 1

    run(main())


@KINDS
def test_response_comes_back_in_the_request_serialization_on_the_wire(kind: SerializeType) -> None:
    async def main() -> None:
        async with serving() as (_server, address), raw(address) as (reader, writer):
            request = RemotingCommand.request(ECHO, {"a": "b"}, serialize_type=kind)
            writer.write(encode_frame(request))
            prefix = await reader.readexactly(8)
            assert prefix[4] == kind  # the serialization type byte of the response
            rest = await reader.readexactly(struct.unpack(">i", prefix[:4])[0] - 4)
            response = decode_frame(prefix + rest)
            assert response.opaque == request.opaque
            assert response.flag & FLAG_RESPONSE

    run(main())


@KINDS
def test_many_concurrent_invokes_match_by_opaque(kind: SerializeType) -> None:
    async def main() -> None:
        async with serving() as (_server, address), client() as remoting:
            bodies = [str(i).encode() * (i % 7 + 1) for i in range(200)]
            responses = await asyncio.gather(
                *(
                    remoting.invoke(
                        address, RemotingCommand.request(ECHO, body=b, serialize_type=kind)
                    )
                    for b in bodies
                )
            )
            assert [r.body for r in responses] == [b[::-1] for b in bodies]

    run(main())


def test_async_handler() -> None:
    async def answer_later(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        await asyncio.sleep(0)
        return request.respond(body=b"async")

    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, answer_later)
        async with serving(dispatcher) as (_server, address), client() as remoting:
            response = await remoting.invoke(address, RemotingCommand.request(SLOW))
            assert response.body == b"async"

    run(main())


@KINDS
def test_handler_building_its_own_command_still_answers_the_request(kind: SerializeType) -> None:
    # As in RocketMQ, the transport stamps the opaque, the response flag and the request's
    # serialization type on whatever the handler returns.
    def careless(_request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return RemotingCommand(code=ResponseCode.SUCCESS, body=b"mine")

    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, careless)
        async with serving(dispatcher) as (_server, address), client() as remoting:
            request = RemotingCommand.request(SLOW, serialize_type=kind)
            response = await remoting.invoke(address, request, timeout_s=DEADLINE_S)
            assert response.body == b"mine"
            assert response.opaque == request.opaque
            assert response.serialize_type is kind

    run(main())


# ---------------------------------------------------------------------------- error answers
@KINDS
def test_unknown_code_answers_request_code_not_supported(kind: SerializeType) -> None:
    async def main() -> None:
        async with serving() as (_server, address), client() as remoting:
            request = RemotingCommand.request(4242, serialize_type=kind)
            response = await remoting.invoke(address, request)
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert response.opaque == request.opaque
            assert response.serialize_type is kind
            assert response.remark is not None
            assert "4242" in response.remark
            assert "test-server" in response.remark

    run(main())


def raising(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
    raise ValueError(f"boom {request.ext_fields.get('n')}")


async def raising_async(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
    await asyncio.sleep(0)
    raise KeyError(request.ext_fields.get("n"))


@KINDS
@pytest.mark.parametrize(
    ("handler", "remark"),
    [(raising, "ValueError: boom 7"), (raising_async, "KeyError: '7'")],
    ids=["sync", "async"],
)
def test_failing_handler_answers_system_error(
    kind: SerializeType,
    handler: Callable[[RemotingCommand, Connection], Any],
    remark: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, handler)
        async with serving(dispatcher) as (_server, address), client() as remoting:
            for _ in range(2):  # and the server keeps serving, on the same connection too
                request = RemotingCommand.request(SLOW, {"n": "7"}, serialize_type=kind)
                response = await remoting.invoke(address, request)
                assert response.code == ResponseCode.SYSTEM_ERROR
                assert response.remark == remark
                assert response.serialize_type is kind
                ok = await remoting.invoke(address, RemotingCommand.request(ECHO, body=b"12"))
                assert ok.body == b"21"
            await assert_still_serving(address)

    with caplog.at_level(logging.ERROR, logger="reconsume.wire.transport"):
        run(main())
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2
    assert all(r.exc_info for r in failures)


# ---------------------------------------------------------------------------- bad input
BAD_STREAMS = {
    "garbage": b"\xde\xad\xbe\xef" * 8,
    "negative-length": struct.pack(">i", -5) + b"\x00" * 8,
    "oversized-length": struct.pack(">ii", MAX_FRAME_BYTES + 1, 2) + b"{}",
    "too-short-length": struct.pack(">i", 2) + b"\x00\x00",
    "invalid-json": frame_of(SerializeType.JSON, b'{"code":1,'),
    "json-not-object": frame_of(SerializeType.JSON, b"[1,2]"),
    "json-wrong-type": frame_of(SerializeType.JSON, b'{"code":"10"}'),
    "unknown-serialize-type": frame_of(7, b"{}"),
    "binary-header-lies": frame_of(SerializeType.ROCKETMQ, b"\x00" * 13 + b"\x7f\xff\xff\xff"),
    "header-beyond-frame": struct.pack(">ii", 6, 100) + b"{}",
}


@pytest.mark.parametrize("data", list(BAD_STREAMS.values()), ids=list(BAD_STREAMS))
def test_bad_frame_closes_only_its_connection(
    data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    handled: list[RemotingCommand] = []

    def record(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        handled.append(request)
        return request.respond()

    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(1, record)
        dispatcher.register(10, record)
        async with serving(dispatcher) as (server, address), client() as bystander:
            # a client connected before the bad one, and one connecting after
            await bystander.invoke(address, RemotingCommand.request(ECHO))
            async with raw(address) as (reader, writer):
                writer.write(data)
                assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
            await eventually_async(
                lambda: len(server.connections) == 1, DEADLINE_S, "bad connection dropped"
            )
            response = await bystander.invoke(address, RemotingCommand.request(ECHO, body=b"z"))
            assert response.body == b"z"
            await assert_still_serving(address)
        assert handled == []

    with caplog.at_level(logging.WARNING, logger="reconsume.wire.transport"):
        run(main())
    assert any("closing connection from 127.0.0.1:" in r.getMessage() for r in caplog.records)


def test_truncated_frame_then_close() -> None:
    async def main() -> None:
        async with serving() as (server, address):
            frame = encode_frame(RemotingCommand.request(ECHO, body=b"payload"))
            async with raw(address) as (reader, writer):
                writer.write(frame[:-3])
                await writer.drain()
                writer.write_eof()
                # the server gives up on the half frame: no answer, just the end of stream
                assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
            await eventually_async(lambda: not server.connections, DEADLINE_S, "connection dropped")
            await assert_still_serving(address)

    run(main())


def test_valid_frames_split_across_writes() -> None:
    async def main() -> None:
        async with serving() as (_server, address), raw(address) as (reader, writer):
            requests = [RemotingCommand.request(ECHO, body=bytes([i]) * 3) for i in range(3)]
            stream = b"".join(encode_frame(r) for r in requests)
            for i in range(0, len(stream), 5):
                writer.write(stream[i : i + 5])
                await writer.drain()
            for request in requests:
                response = await read_command(reader)
                assert response.opaque == request.opaque

    run(main())


# ---------------------------------------------------------------------------- oneway
@KINDS
def test_oneway_request_gets_no_response(kind: SerializeType) -> None:
    seen: list[RemotingCommand] = []

    def record(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        seen.append(request)
        return request.respond(body=b"must not be sent")

    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, record)
        async with serving(dispatcher) as (_server, address):
            async with raw(address) as (reader, writer):
                oneway = RemotingCommand.request(SLOW, oneway=True, serialize_type=kind)
                normal = RemotingCommand.request(ECHO, serialize_type=kind)
                writer.write(encode_frame(oneway) + encode_frame(normal))
                # the first frame back answers the second request
                response = await read_command(reader)
                assert response.opaque == normal.opaque
                assert [r.opaque for r in seen] == [oneway.opaque]
                assert seen[0].is_oneway
            async with client() as remoting:
                await remoting.send_oneway(address, RemotingCommand.request(SLOW, oneway=True))
                await eventually_async(lambda: len(seen) == 2, DEADLINE_S, "oneway request handled")

    run(main())


# ---------------------------------------------------------------------------- failures
def test_invoke_timeout() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def late(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
            await gate.wait()
            return request.respond(body=b"late")

        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, late)
        dispatcher.register(RequestCode.PULL_MESSAGE, lambda _r, _c: None)  # never answers
        async with serving(dispatcher) as (_server, address), client() as remoting:
            with pytest.raises(
                RemotingTimeoutError,
                match=r"PULL_MESSAGE to 127\.0\.0\.1:\d+: no response within 0\.05s",
            ):
                await remoting.invoke(
                    address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout_s=0.05
                )
            with pytest.raises(RemotingTimeoutError) as info:
                await remoting.invoke(address, RemotingCommand.request(SLOW), timeout_s=0.05)
            assert info.value.retriable
            gate.set()  # the late answer arrives after its invoke gave up, and is dropped
            response = await remoting.invoke(address, RemotingCommand.request(SLOW))
            assert response.body == b"late"

    run(main())


def test_expect_sends_at_once_and_hands_the_answer_to_its_waiter_as_it_is_read() -> None:
    """``expect`` writes before it returns; the response reaches the waiter inside the read
    that holds it (no task in between), and a lost connection reaches it as an exception."""

    class Waiting:
        def __init__(self) -> None:
            self.told: list[RemotingCommand | BaseException] = []

        def done(self) -> bool:
            return False

        def set_result(self, result: RemotingCommand, /) -> None:
            self.told.append(result)

        def set_exception(self, exception: BaseException, /) -> None:
            self.told.append(exception)

    async def main() -> None:
        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, lambda _r, _c: None)  # never answers
        async with serving(dispatcher) as (server, address), client() as remoting:
            connection = await remoting.connection(address)
            waiting = Waiting()
            connection.expect(RemotingCommand.request(ECHO, body=b"now"), waiting)
            connection.expect(RemotingCommand.request(SLOW), waiting)
            await eventually_async(lambda: waiting.told, DEADLINE_S)
            [answer] = waiting.told
            assert isinstance(answer, RemotingCommand)
            assert answer.body == b"won"  # echoed reversed
            await server.stop()
            await eventually_async(lambda: len(waiting.told) == 2, DEADLINE_S)
            assert isinstance(waiting.told[1], RemotingConnectError)

    run(main())


def test_connection_refused() -> None:
    async def main() -> None:
        # A bound socket that does not listen keeps the port taken and refuses connections.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as placeholder:
            placeholder.bind(("127.0.0.1", 0))
            port = placeholder.getsockname()[1]
            async with client() as remoting:
                with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}") as info:
                    await remoting.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO))
                assert info.value.retriable
                with pytest.raises(RemotingConnectError, match="not host:port"):
                    await remoting.invoke("no-port", RemotingCommand.request(ECHO))

    run(main())


def test_pending_invoke_fails_when_the_peer_closes() -> None:
    async def main() -> None:
        arrived = asyncio.Event()

        async def hold(request: RemotingCommand, conn: Connection) -> RemotingCommand:
            arrived.set()
            conn.close()
            return request.respond()

        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, hold)
        async with serving(dispatcher) as (_server, address), client() as remoting:
            with pytest.raises(RemotingError, match="closed") as info:
                await remoting.invoke(address, RemotingCommand.request(SLOW), DEADLINE_S)
            assert not isinstance(info.value, RemotingTimeoutError)
            assert arrived.is_set()
            # the client opens a new connection on next use
            response = await remoting.invoke(address, RemotingCommand.request(ECHO, body=b"x"))
            assert response.body == b"x"

    run(main())


def test_answer_after_the_peer_left_is_dropped_quietly() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        gate = asyncio.Event()
        connections: list[Connection] = []

        async def late(request: RemotingCommand, conn: Connection) -> RemotingCommand:
            connections.append(conn)
            await gate.wait()
            return request.respond()

        dispatcher = server_dispatcher()
        dispatcher.register(SLOW, late)
        async with serving(dispatcher) as (server, address):
            async with raw(address) as (_reader, writer):
                writer.write(encode_frame(RemotingCommand.request(SLOW)))
                await eventually_async(lambda: bool(connections), DEADLINE_S, "request handled")
            await eventually_async(lambda: not server.connections, DEADLINE_S, "client gone")
            gate.set()
            await eventually_async(
                lambda: not connections[0]._tasks, DEADLINE_S, "handler finished"
            )
            gc.collect()
        assert reported == []

    run(main())


# ---------------------------------------------------------------------------- server → client
@KINDS
def test_server_invokes_the_client_on_its_connection(kind: SerializeType) -> None:
    async def main() -> None:
        registered: list[Connection] = []
        notified: list[RemotingCommand] = []

        def register(request: RemotingCommand, conn: Connection) -> RemotingCommand:
            registered.append(conn)
            return request.respond()

        def running_info(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
            group = request.ext_fields["consumerGroup"]
            return request.respond(body=f"running {group}".encode())

        def notify(request: RemotingCommand, _conn: Connection) -> None:
            notified.append(request)

        client_dispatcher = Dispatcher("test-client")
        client_dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
        client_dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, notify)
        server_side = server_dispatcher()
        server_side.register(RequestCode.CHECK_CLIENT_CONFIG, register)

        async with serving(server_side) as (_server, address), client(client_dispatcher) as c:
            await c.invoke(address, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG))
            (conn,) = registered
            request = RemotingCommand.request(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": "g1", "clientId": "c1"},
                serialize_type=kind,
            )
            response = await conn.invoke(request, DEADLINE_S)
            assert response.code == ResponseCode.SUCCESS
            assert response.body == b"running g1"
            assert response.serialize_type is kind
            # an unknown code on the client side is answered like on the server side
            unknown = await conn.invoke(RemotingCommand.request(4242), DEADLINE_S)
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert unknown.remark is not None
            assert "test-client" in unknown.remark
            conn.send(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g1"}, oneway=True
                )
            )
            await eventually_async(lambda: len(notified) == 1, DEADLINE_S, "notification handled")
            # and the client's own requests still work alongside
            echo_back = await c.invoke(address, RemotingCommand.request(ECHO, body=b"ok"))
            assert echo_back.body == b"ko"

    run(main())


def test_server_stop_closes_client_connections() -> None:
    async def main() -> None:
        closed: list[Connection] = []
        async with client() as remoting:
            async with serving() as (server, address):
                server.on_disconnect.append(closed.append)
                connection = await remoting.connection(address)
                await remoting.invoke(address, RemotingCommand.request(ECHO))
            await asyncio.wait_for(connection.closed, DEADLINE_S)
            assert not connection.is_open
            assert len(closed) == 1
            with pytest.raises(RemotingError, match="closed"):
                connection.send(RemotingCommand.request(ECHO))

    run(main())


def test_a_cancel_arriving_as_a_connection_attempt_fails_stops_the_task() -> None:
    """A task that loops over refused connections (a replica whose master is gone) stops when
    cancelled, even when the cancel lands in the loop turn the refusal does."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        attempts: list[asyncio.Future[Any]] = []

        def connect(*_args: object, **_kwargs: object) -> asyncio.Future[Any]:
            attempt = loop.create_future()
            if attempts:  # later ones are refused a turn later
                loop.call_soon(attempt.set_exception, ConnectionRefusedError(111, "refused"))
            attempts.append(attempt)
            return attempt

        loop.create_connection = connect  # type: ignore[method-assign,assignment]
        client = RemotingClient(signer=None, tls=None)

        gave_up = False

        async def reconnecting() -> None:
            while not gave_up:  # only ends the test when it failed
                with contextlib.suppress(RemotingConnectError):
                    await client.connection("127.0.0.1:9")

        task = asyncio.create_task(reconnecting())
        await eventually_async(lambda: bool(attempts), DEADLINE_S, "a connection attempt")
        attempts[0].set_exception(ConnectionRefusedError(111, "Connection refused"))
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=DEADLINE_S)
        gave_up = True
        assert done, "the cancel was lost: the task reconnects forever"
        assert task.cancelled()

    run(scenario())


def test_a_side_port_serves_as_the_server_and_closing_it_ends_only_its_connections() -> None:
    """What a replicated broker's master port is (``RemotingServer.listen_also``): the same
    dispatcher, its connections among the server's and told to ``on_disconnect``; closed,
    it refuses new connections and ends its own, the main port's stay."""

    async def scenario() -> None:
        async with serving() as (server, main), client() as remoting:
            ended: list[Connection] = []
            server.on_disconnect.append(ended.append)
            side = await server.listen_also("127.0.0.1", 0)
            await side.start_serving()
            other = f"127.0.0.1:{side.port}"
            for address in (main, other):
                answer = await remoting.invoke(address, RemotingCommand.request(ECHO), 5)
                assert (answer.remark or "").startswith("echo from")
            assert len(server.connections) == 2
            (taken,) = side.connections
            await side.close()
            await eventually_async(lambda: ended == [taken], DEADLINE_S, "the side's ended")
            assert len(server.connections) == 1
            with pytest.raises(RemotingConnectError):
                await remoting.invoke(other, RemotingCommand.request(ECHO), 5)
            answer = await remoting.invoke(main, RemotingCommand.request(ECHO), 5)
            assert answer.code == ResponseCode.SUCCESS

    run(scenario())
