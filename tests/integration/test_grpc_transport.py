"""The broker's own HTTP/2 and gRPC server (:mod:`reconsume.wire.h2`) against a gRPC client
nobody here wrote (grpcio's C core): unary, server-streaming and bidirectional calls; messages
across frame and window boundaries; statuses, deadlines, cancellation and compression as gRPC
defines them; TLS with ALPN; and a connection speaking garbage closed alone while the server
keeps serving. The server runs on its own event loop thread; the client calls from the test's.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from reconsume.wire.h2 import hpack
from reconsume.wire.tls import ClientAuth, TlsMode, TlsServerConfig

from ..polling import eventually
from ..tls_certs import make_ca
from .grpc_support import Running, same, serve


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    with serve() as served:
        yield served


@pytest.fixture
def channel(running: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{running.port}") as opened:
        yield opened


def _call(channel: grpc.Channel, method: str) -> grpc.UnaryUnaryMultiCallable[bytes, bytes]:
    return channel.unary_unary(method, request_serializer=same, response_deserializer=same)


@pytest.mark.parametrize("size", [0, 1, 16_379, 16_380, 70_000, 1 << 20, (4 << 20) - 64])
def test_a_unary_call_returns_its_message_whatever_its_size(
    channel: grpc.Channel, size: int
) -> None:
    """Messages across DATA frame (16 KiB) and flow-control window (64 KiB) boundaries."""
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    assert _call(channel, "/t.T/Echo")(body, timeout=30) == body


def test_concurrent_calls_from_threads_each_get_their_own_answer(channel: grpc.Channel) -> None:
    echo = _call(channel, "/t.T/Echo")

    def one(index: int) -> bool:
        body = index.to_bytes(4, "big") * (1 + index % 300)
        return echo(body, timeout=30) == body

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(2000)))
    assert all(results)


def test_a_method_answered_at_once_answers_and_refuses(channel: grpc.Channel) -> None:
    """A plain-function behavior (no task, no timer), with and without a deadline."""
    now = _call(channel, "/t.T/Now")
    assert now(b"quick") == b"QUICK"
    assert now(b"quick", timeout=5) == b"QUICK"
    with pytest.raises(grpc.RpcError) as failure:
        now(b"refuse", timeout=5)
    assert failure.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert failure.value.details() == "refused at once"


def test_the_behavior_sees_the_peer_and_the_metadata(channel: grpc.Channel) -> None:
    answer = _call(channel, "/t.T/WhoAmI")(b"", metadata=[("x-test", "hello")], timeout=10)
    peer, value = answer.decode().split("|")
    assert peer.startswith("ipv4:127.0.0.1:")
    assert value == "hello"


def test_a_server_stream_delivers_every_message_in_order(channel: grpc.Channel) -> None:
    """12.5 MiB in 200 messages: the client's windows are refilled as it reads."""
    stream = channel.unary_stream(
        "/t.T/Chunks", request_serializer=same, response_deserializer=same
    )
    received = list(stream(b"200x65536", timeout=60))
    assert len(received) == 200
    assert all(m == index.to_bytes(4, "big") * 16384 for index, m in enumerate(received))


def test_a_bidirectional_call_answers_each_message(channel: grpc.Channel) -> None:
    chat = channel.stream_stream("/t.T/Chat", request_serializer=same, response_deserializer=same)
    requests = [f"message {index}".encode() for index in range(300)]
    assert list(chat(iter(requests), timeout=30)) == [r[::-1] for r in requests]


def test_a_client_streaming_faster_than_the_server_reads_is_stopped(
    channel: grpc.Channel,
) -> None:
    """Past 1,024 unread request messages the call ends RESOURCE_EXHAUSTED; the server serves
    on."""
    deaf = channel.stream_stream("/t.T/Deaf", request_serializer=same, response_deserializer=same)
    with pytest.raises(grpc.RpcError) as failure:
        list(deaf(iter([b"x"] * 5000), timeout=20))
    assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _call(channel, "/t.T/Echo")(b"still here", timeout=10) == b"still here"


@pytest.mark.parametrize("messages", [0, 2, 1000])
def test_a_unary_call_needs_exactly_one_request_message(
    channel: grpc.Channel, messages: int
) -> None:
    """None or more than one (sent as a stream to the unary path): INTERNAL, as grpc-java."""
    stream = channel.stream_unary("/t.T/Echo", request_serializer=same, response_deserializer=same)
    with pytest.raises(grpc.RpcError) as failure:
        stream(iter([b"x"] * messages), timeout=10)
    assert failure.value.code() == grpc.StatusCode.INTERNAL
    assert _call(channel, "/t.T/Echo")(b"after", timeout=10) == b"after"


def test_an_unknown_method_is_unimplemented(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _call(channel, "/t.T/Nothing")(b"x", timeout=10)
    assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_an_abort_answers_its_code_and_message_percent_encoded(channel: grpc.Channel) -> None:
    message = "naïve 100% — not ready\n"
    with pytest.raises(grpc.RpcError) as failure:
        _call(channel, "/t.T/Fail")(message.encode(), timeout=10)
    assert failure.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert failure.value.details() == message


def test_a_failing_behavior_answers_unknown_and_the_server_serves_on(
    channel: grpc.Channel,
) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _call(channel, "/t.T/Boom")(b"", timeout=10)
    assert failure.value.code() == grpc.StatusCode.UNKNOWN
    assert "a bug" in (failure.value.details() or "")
    assert _call(channel, "/t.T/Echo")(b"after", timeout=10) == b"after"


def test_a_deadline_ends_the_call_and_cancels_its_behavior(
    channel: grpc.Channel, running: Running
) -> None:
    before = running.seen.cancelled.count("slow")
    with pytest.raises(grpc.RpcError) as failure:
        _call(channel, "/t.T/Slow")(b"", timeout=0.3)
    assert failure.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    eventually(lambda: running.seen.cancelled.count("slow") > before, timeout_s=5)


def test_a_cancelled_stream_closes_the_behaviors_generator(
    channel: grpc.Channel, running: Running
) -> None:
    stream = channel.unary_stream(
        "/t.T/Chunks", request_serializer=same, response_deserializer=same
    )
    call = stream(b"100000x64", timeout=60)
    assert len(next(call)) == 64
    call.cancel()
    eventually(lambda: "100000x64" in running.seen.finished_streams, timeout_s=5)


def test_a_gzip_compressed_request_is_read(running: Running) -> None:
    with grpc.insecure_channel(
        f"127.0.0.1:{running.port}", compression=grpc.Compression.Gzip
    ) as compressed:
        body = b"compress me " * 10_000
        assert _call(compressed, "/t.T/Echo")(body, timeout=10) == body


def _goaway_code(port: int, data: bytes) -> int:
    """The error code of the GOAWAY the server closes the connection with after ``data``."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    position = 0
    while position + 9 <= len(answer):
        length = int.from_bytes(answer[position : position + 3], "big")
        kind = answer[position + 3]
        payload = answer[position + 9 : position + 9 + length]
        position += 9 + length
        if kind == 0x7:
            return int.from_bytes(payload[4:8], "big")
    raise AssertionError(f"no GOAWAY in {answer!r}")


@pytest.mark.parametrize(
    ("garbage", "code"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0x1),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64, 0x6),
        (
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            + b"\x00\x00\x05\x01\x05\x00\x00\x00\x01\xff\xff\xff\xff\xff",
            0x9,
        ),
    ],
    ids=["http1", "junk-frames", "undecodable-headers"],
)
def test_garbage_closes_its_connection_only(
    running: Running, channel: grpc.Channel, garbage: bytes, code: int
) -> None:
    """HTTP/1.1, frames above the size limit, a header block that does not decode: GOAWAY
    with PROTOCOL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR; other connections serve on."""
    assert _goaway_code(running.port, garbage) == code
    assert _call(channel, "/t.T/Echo")(b"still serving", timeout=10) == b"still serving"


def test_tls_with_alpn_serves_and_plaintext_is_refused(tmp_path: Path) -> None:
    authority = make_ca(tmp_path)
    tls = TlsServerConfig(
        mode=TlsMode.PERMISSIVE,
        cert_file=str(authority.server.cert_file),
        key_file=str(authority.server.key_file),
        ca_file=str(authority.ca_file),
        client_auth=ClientAuth.NONE,
    )
    with serve(tls) as served:
        credentials = grpc.ssl_channel_credentials(authority.ca_file.read_bytes())
        target = f"localhost:{served.port}"
        with grpc.secure_channel(target, credentials) as secure:
            assert _call(secure, "/t.T/Echo")(b"over tls", timeout=10) == b"over tls"
        with grpc.insecure_channel(target) as plain, pytest.raises(grpc.RpcError) as failure:
            _call(plain, "/t.T/Echo")(b"in clear", timeout=5)
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_stop_lets_a_call_in_flight_finish(running: Running) -> None:
    with serve() as served, grpc.insecure_channel(f"127.0.0.1:{served.port}") as opened:
        chunks = opened.unary_stream(
            "/t.T/Chunks", request_serializer=same, response_deserializer=same
        )
        call = chunks(b"1500x16", timeout=30)
        first = next(call)
        stopping = asyncio.run_coroutine_threadsafe(served.server.stop(10), served.loop)
        rest = list(call)
        stopping.result(15)
    assert len(first) == 16
    assert len(rest) == 1499


def _status_without_cancel(port: int, method: str, timeout: str) -> dict[str, str]:
    """The trailers of a unary call with ``grpc-timeout: <timeout>`` from a client that never
    cancels it: the call ends when the server says so. (grpcio's client resets the stream at
    its own deadline, which races the server's timer for the same moment.)"""
    block = hpack.encode(
        [
            (":method", "POST"), (":scheme", "http"), (":path", method),
            (":authority", "test"), ("content-type", "application/grpc"), ("te", "trailers"),
            ("grpc-timeout", timeout),
        ]
    )  # fmt: skip
    message = b"\x00\x00\x00\x00\x00"  # one empty, uncompressed message

    def frame(kind: int, flags: int, payload: bytes) -> bytes:  # on stream 1
        head = len(payload).to_bytes(3, "big") + bytes([kind, flags]) + (1).to_bytes(4, "big")
        return head + payload

    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(preface + frame(0x1, 0x4, block) + frame(0x0, 0x1, message))
        answer = b""
        while True:
            chunk = sock.recv(65536)
            assert chunk, f"closed before the call's trailers: {answer!r}"
            answer += chunk
            position, decoder = 0, hpack.Decoder()  # every frame so far, from the start
            while position + 9 <= len(answer):
                length = int.from_bytes(answer[position : position + 3], "big")
                kind, flags = answer[position + 3], answer[position + 4]
                payload = answer[position + 9 : position + 9 + length]
                if len(payload) < length:
                    break
                position += 9 + length
                if kind == 0x1:
                    headers = dict(decoder.decode(payload, 1 << 16))
                    if flags & 0x1:  # END_STREAM: the trailers
                        return headers


def test_the_server_counts_calls_by_status_and_connection_errors() -> None:
    with serve() as served, grpc.insecure_channel(f"127.0.0.1:{served.port}") as opened:
        _call(opened, "/t.T/Echo")(b"one", timeout=10)
        _call(opened, "/t.T/Now")(b"two", timeout=10)
        trailers = _status_without_cancel(served.port, "/t.T/Slow", "200m")
        assert trailers["grpc-status"] == "4", trailers  # DEADLINE_EXCEEDED
        with pytest.raises(grpc.RpcError):
            _call(opened, "/t.T/Nothing")(b"", timeout=0.3)
        _goaway_code(served.port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64)
        stats = served.server.stats
        eventually(lambda: stats.connection_errors[0x6] == 1, timeout_s=5)
        assert stats.calls == {
            ("Echo", 0): 1,
            ("Now", 0): 1,
            ("Slow", 4): 1,
            ("unknown", 12): 1,
        }
        assert stats.open_connections >= 1
        assert stats.accepted_connections >= 2


def test_another_port_serves_the_same_methods_until_it_closes_with_its_connections() -> None:
    """A replicated broker's gRPC master port (``GrpcServer.listen_also``): the same methods
    and counters; closed, it ends its connections at once (a call waiting on it fails, and a
    new one cannot connect) while the server's own port serves on."""
    with serve() as served:
        side = asyncio.run_coroutine_threadsafe(
            served.server.listen_also("127.0.0.1", 0), served.loop
        ).result(10)
        asyncio.run_coroutine_threadsafe(side.start_serving(), served.loop).result(10)
        with (
            grpc.insecure_channel(f"127.0.0.1:{side.port}") as on_side,
            grpc.insecure_channel(f"127.0.0.1:{served.port}") as on_own,
        ):
            assert _call(on_side, "/t.T/Echo")(b"side", timeout=10) == b"side"
            assert served.server.stats.calls[("Echo", 0)] == 1
            waiting = _call(on_side, "/t.T/Slow").future(b"", timeout=20)
            eventually(lambda: len(side.connections) == 1, timeout_s=5)
            asyncio.run_coroutine_threadsafe(side.close(), served.loop).result(10)
            with pytest.raises(grpc.RpcError) as cut:
                waiting.result(timeout=15)
            assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.RpcError) as refused:
                _call(on_side, "/t.T/Echo")(b"again", timeout=3)
            assert refused.value.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
            assert _call(on_own, "/t.T/Echo")(b"own", timeout=10) == b"own"
            assert not side.connections
