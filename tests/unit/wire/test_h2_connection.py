"""H2Connection driven without sockets: a recording transport stands for the socket, a test
client writes frames into data_received and parses what the connection writes after one turn of
the event loop (the connection gathers its writes and flushes them with loop.call_soon)."""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, NamedTuple, ParamSpec

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconsume.wire.h2 import hpack
from reconsume.wire.h2.connection import H2Connection
from reconsume.wire.h2.frames import Limits, frame
from reconsume.wire.h2.streams import Stream

# RFC 9113's numbers, written out here rather than taken from the module under test.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = range(8)
WINDOW_UPDATE, CONTINUATION = 8, 9
ACK = END_STREAM = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
END = END_HEADERS | END_STREAM
MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 3, 4, 5, 6
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED, FRAME_SIZE_ERROR = 0, 1, 3, 5, 6
REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 7, 8, 9, 0xB

REQUEST = [(":method", "POST"), (":scheme", "http"), (":path", "/a.B/C"), ("te", "trailers")]
BLOCK = hpack.encode(REQUEST)
OK = hpack.encode([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS = hpack.encode([("grpc-status", "0")])
INDEXING = b"\x40\x07x-small\x011"
"""A literal with incremental indexing: x-small: 1 becomes dynamic index 62."""
USES_INDEX = b"\x83\xbe"
""":method POST, then dynamic index 62."""
DEFAULT_LIMITS = Limits()
P = ParamSpec("P")


class Frame(NamedTuple):
    kind: int
    flags: int
    stream: int
    payload: bytes


def parse(data: bytes) -> list[Frame]:
    frames, position = [], 0
    while position < len(data):
        length = int.from_bytes(data[position : position + 3], "big")
        kind, flags, stream = struct.unpack_from(">BBI", data, position + 3)
        payload = data[position + 9 : position + 9 + length]
        assert len(payload) == length, "a frame cut short"
        frames.append(Frame(kind, flags, stream & 0x7FFFFFFF, payload))
        position += 9 + length
    return frames


def u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def settings_frame(*pairs: tuple[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


SETTINGS_ACK = Frame(SETTINGS, ACK, 0, b"")


class FakeTransport:
    """Records what is written before and after close(), and the number of flushes."""

    def __init__(self) -> None:
        self.written, self.after_close = bytearray(), bytearray()
        self.flushes = 0
        self.closed = False

    def writelines(self, chunks: Iterable[bytes]) -> None:
        self.flushes += 1
        for chunk in chunks:
            self.write(chunk)

    def write(self, data: bytes) -> None:
        (self.after_close if self.closed else self.written).extend(data)

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default


class Handler:
    def __init__(self, stream: Stream, headers: list[hpack.Header], end_stream: bool) -> None:
        self.stream, self.headers, self.end_stream = stream, headers, end_stream
        self.received: list[tuple[bytes, bool]] = []
        self.resets = 0

    def data(self, payload: bytes, end_stream: bool) -> None:
        self.received.append((payload, end_stream))

    def reset(self) -> None:
        self.resets += 1


class Client:
    """The connection, its transport, and an application whose handlers it records (and
    that calls ``answer`` with each new stream)."""

    def __init__(
        self, limits: Limits = DEFAULT_LIMITS, answer: Callable[[Stream], None] | None = None
    ) -> None:
        self.handlers: list[Handler] = []
        self.answer = answer
        self.transport = FakeTransport()
        self.closed: list[H2Connection] = []
        self.connection = H2Connection(self, limits, self.closed.append)
        self.connection.connection_made(self.transport)  # type: ignore[arg-type]
        self._seen = 0

    def open(self, stream: Stream, headers: list[hpack.Header], end_stream: bool) -> Handler:
        self.handlers.append(Handler(stream, headers, end_stream))
        if self.answer is not None:
            self.answer(stream)
        return self.handlers[-1]

    def send(self, *frames: bytes) -> None:
        self.connection.data_received(b"".join(frames))

    async def read(self) -> list[Frame]:
        """The frames written since the last read, after one turn of the loop."""
        await asyncio.sleep(0)
        new = bytes(self.transport.written[self._seen :])
        self._seen = len(self.transport.written)
        return parse(new)

    async def start(self, *pairs: tuple[int, int]) -> None:
        self.send(PREFACE, settings_frame(*pairs))
        await self.read()

    def request(self, stream_id: int, end_stream: bool = False, block: bytes = BLOCK) -> None:
        self.send(frame(HEADERS, END if end_stream else END_HEADERS, stream_id, block))

    def stream(self, index: int = 0) -> Stream:
        return self.handlers[index].stream

    def goaway(self) -> tuple[int, int]:
        """(last stream id, error code) of the GOAWAY the connection closed with."""
        assert self.transport.closed
        last = parse(bytes(self.transport.written))[-1]
        assert last.kind == GOAWAY
        last_stream, code = struct.unpack_from(">II", last.payload)
        return last_stream, code


def answer_at_once(stream: Stream) -> None:
    stream.send_headers(OK)
    stream.send_data(b"x" * 70)
    stream.send_headers(TRAILERS, end_stream=True)


def in_loop(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


# ---------------------------------------------------------------------------- set-up
@in_loop
async def test_server_preface_then_settings_ack_and_ping() -> None:
    """The server's SETTINGS and connection WINDOW_UPDATE come first; the preface may come an
    octet at a time; SETTINGS is acknowledged, PING echoed, PRIORITY and extensions ignored."""
    client = Client()
    assert client.connection.peer == "ipv4:127.0.0.1:5555"
    server_settings, update = await client.read()
    assert server_settings[:3] == (SETTINGS, 0, 0)
    assert dict(struct.iter_unpack(">HI", server_settings.payload)) == {
        MAX_CONCURRENT_STREAMS: 4096,
        INITIAL_WINDOW_SIZE: 1 << 20,
        MAX_HEADER_LIST_SIZE: 64 << 10,
    }
    assert update == Frame(WINDOW_UPDATE, 0, 0, u32((16 << 20) - 65_535))
    for octet in PREFACE:
        client.send(bytes((octet,)))
    client.send(settings_frame((MAX_FRAME_SIZE, 20_000)))
    assert await client.read() == [SETTINGS_ACK]
    client.send(frame(PING, 0, 0, b"pingpong"), frame(PING, ACK, 0, b"ignored!"))
    assert await client.read() == [Frame(PING, ACK, 0, b"pingpong")]
    client.send(frame(PRIORITY, 0, 1, bytes(5)), frame(0xF0, 0, 0, b"extension"))
    assert await client.read() == []
    assert not client.transport.closed


# ---------------------------------------------------------------------------- receiving
@in_loop
async def test_headers_open_a_stream_and_data_reaches_its_handler() -> None:
    """HEADERS (split over CONTINUATIONs, or padded with a priority) open streams; DATA, padded
    or not, and trailers reach the handler; the stream window is credited at its half."""
    client = Client(Limits(stream_window=1000))
    await client.start()
    client.request(1)
    client.send(frame(DATA, 0, 1, bytes(499)), frame(DATA, PADDED, 1, b"\x03def\0\0\0"))
    assert await client.read() == [Frame(WINDOW_UPDATE, 0, 1, u32(506))]
    client.request(1, end_stream=True, block=TRAILERS)
    client.send(
        frame(HEADERS, END_STREAM, 3, BLOCK[:10]),
        frame(CONTINUATION, 0, 3, BLOCK[10:20]),
        frame(CONTINUATION, END_HEADERS, 3, BLOCK[20:]),
    )
    padded = b"\x02" + bytes(5) + BLOCK + b"\0\0"
    client.send(frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 5, padded))
    client.send(frame(DATA, END_STREAM, 5, b"g"))
    first, second, third = client.handlers
    assert first.received == [(bytes(499), False), (b"def", False), (b"", True)]
    assert [(h.stream.id, h.headers, h.end_stream) for h in client.handlers] == [
        (1, REQUEST, False),
        (3, REQUEST, True),
        (5, REQUEST, False),
    ]
    assert (second.received, third.received) == ([], [(b"g", True)])


# ---------------------------------------------------------------------------- sending
@in_loop
async def test_an_answer_leaves_in_one_write() -> None:
    """HEADERS, DATA, trailers; an answer complete before its request adds RST_STREAM
    NO_ERROR; nothing is sent on a stream once answered."""
    client = Client(answer=answer_at_once)
    await client.start()
    flushes = client.transport.flushes
    client.request(1, end_stream=True)
    client.request(3)
    answer_1 = [
        Frame(HEADERS, END_HEADERS, 1, OK),
        Frame(DATA, 0, 1, b"x" * 70),
        Frame(HEADERS, END, 1, TRAILERS),
    ]
    answer_3 = [f._replace(stream=3) for f in answer_1]
    assert await client.read() == [*answer_1, *answer_3, Frame(RST_STREAM, 0, 3, u32(NO_ERROR))]
    assert client.transport.flushes == flushes + 1
    assert client.stream().local_closed
    assert client.connection.streams == {}
    client.stream().send_data(b"late")
    assert await client.read() == []


@in_loop
async def test_data_waits_for_the_stream_window_and_trailers_follow_in_order() -> None:
    client = Client()
    await client.start((INITIAL_WINDOW_SIZE, 100))
    client.request(1, end_stream=True)
    stream = client.stream()
    stream.send_headers(OK)
    stream.send_data(b"a" * 250)
    stream.send_data(b"b" * 10)
    stream.send_headers(TRAILERS, end_stream=True)
    assert await client.read() == [
        Frame(HEADERS, END_HEADERS, 1, OK),
        Frame(DATA, 0, 1, b"a" * 100),
    ]
    client.send(frame(WINDOW_UPDATE, 0, 1, u32(100)))
    assert await client.read() == [Frame(DATA, 0, 1, b"a" * 100)]
    client.send(frame(WINDOW_UPDATE, 0, 1, u32(1000)))
    assert await client.read() == [
        Frame(DATA, 0, 1, b"a" * 50),
        Frame(DATA, 0, 1, b"b" * 10),
        Frame(HEADERS, END, 1, TRAILERS),
    ]
    assert client.connection.streams == {}


@in_loop
async def test_data_waits_for_the_connection_window_and_new_settings() -> None:
    """The connection's 65,535 octets, then its WINDOW_UPDATE for the blocked streams in turn;
    a new SETTINGS_INITIAL_WINDOW_SIZE moves the open streams' windows."""
    client = Client()
    await client.start((INITIAL_WINDOW_SIZE, 1 << 20))
    client.request(1, end_stream=True)
    client.request(3, end_stream=True)
    client.stream(0).send_data(b"x" * 70_000, end_stream=True)
    assert [len(f.payload) for f in await client.read()] == [16_384] * 3 + [16_383]
    client.stream(1).send_data(b"y" * 10, end_stream=True)
    client.send(frame(WINDOW_UPDATE, 0, 0, u32(10_000)))
    assert await client.read() == [
        Frame(DATA, END_STREAM, 1, b"x" * 4465),
        Frame(DATA, END_STREAM, 3, b"y" * 10),
    ]
    client.request(5, end_stream=True)
    client.send(settings_frame((INITIAL_WINDOW_SIZE, 0)))
    client.stream(2).send_data(b"z" * 10, end_stream=True)
    assert await client.read() == [SETTINGS_ACK]
    client.send(settings_frame((INITIAL_WINDOW_SIZE, 4)), settings_frame((INITIAL_WINDOW_SIZE, 10)))
    assert await client.read() == [
        SETTINGS_ACK,
        Frame(DATA, 0, 5, b"zzzz"),
        SETTINGS_ACK,
        Frame(DATA, END_STREAM, 5, b"zzzzzz"),
    ]


@in_loop
async def test_frames_above_the_peer_frame_size_are_split() -> None:
    client = Client()
    await client.start()
    client.request(1, end_stream=True)
    client.request(3, end_stream=True)
    big = hpack.encode([(":status", "200"), ("x-big", "v" * 40_000)])
    client.stream(0).send_headers(big, end_stream=True)
    client.stream(1).send_data(b"d" * 40_000, end_stream=True)
    frames = await client.read()
    assert [(f.kind, f.flags, f.stream, len(f.payload)) for f in frames] == [
        (HEADERS, END_STREAM, 1, 16_384),
        (CONTINUATION, 0, 1, 16_384),
        (CONTINUATION, END_HEADERS, 1, len(big) - 32_768),
        (DATA, 0, 3, 16_384),
        (DATA, 0, 3, 16_384),
        (DATA, END_STREAM, 3, 7232),
    ]
    assert b"".join(f.payload for f in frames[:3]) == big
    client.send(settings_frame((MAX_FRAME_SIZE, 20_000)), frame(WINDOW_UPDATE, 0, 0, u32(40_000)))
    client.request(5, end_stream=True)
    client.stream(2).send_data(b"d" * 40_000)
    assert [len(f.payload) for f in await client.read()] == [0, 20_000, 20_000]


# ---------------------------------------------------------------------------- connection errors
HEADERS_1 = frame(HEADERS, END_HEADERS, 1, BLOCK)
HEADERS_CUT = frame(HEADERS, 0, 1, BLOCK)
"""A HEADERS waiting for its CONTINUATION."""
CONNECTION_ERRORS = {
    "not-a-preface": (b"GET / HTTP/1.1\r\n\r\n", PROTOCOL_ERROR),
    "first-frame-not-settings": (PREFACE + frame(PING, 0, 0, bytes(8)), PROTOCOL_ERROR),
    "frame-above-16384": ((16_385 << 8 | DATA).to_bytes(4, "big") + bytes(5), FRAME_SIZE_ERROR),
    "headers-on-stream-0": (frame(HEADERS, END_HEADERS, 0, BLOCK), PROTOCOL_ERROR),
    "headers-on-even-stream": (frame(HEADERS, END_HEADERS, 2, BLOCK), PROTOCOL_ERROR),
    "headers-padding-too-long": (frame(HEADERS, END | PADDED, 1, b"\x05ab"), PROTOCOL_ERROR),
    "continuation-alone": (frame(CONTINUATION, END_HEADERS, 1, BLOCK), PROTOCOL_ERROR),
    "continuation-elsewhere": (HEADERS_CUT + frame(CONTINUATION, 4, 3, b""), PROTOCOL_ERROR),
    "headers-interrupted": (HEADERS_CUT + frame(PING, 0, 0, bytes(8)), PROTOCOL_ERROR),
    "bad-header-block": (frame(HEADERS, END_HEADERS, 1, b"\x80"), COMPRESSION_ERROR),
    "push-promise": (frame(PUSH_PROMISE, END_HEADERS, 1, u32(2) + BLOCK), PROTOCOL_ERROR),
    "window-update-0": (frame(WINDOW_UPDATE, 0, 0, u32(0)), PROTOCOL_ERROR),
    "window-overflow": (frame(WINDOW_UPDATE, 0, 0, u32((1 << 31) - 1)), FLOW_CONTROL_ERROR),
    "settings-length": (frame(SETTINGS, 0, 0, bytes(5)), FRAME_SIZE_ERROR),
    "settings-ack-payload": (frame(SETTINGS, ACK, 0, bytes(6)), FRAME_SIZE_ERROR),
    "settings-window": (settings_frame((INITIAL_WINDOW_SIZE, 1 << 31)), FLOW_CONTROL_ERROR),
    "settings-frame-size": (settings_frame((MAX_FRAME_SIZE, 16_383)), PROTOCOL_ERROR),
    "ping-size": (frame(PING, 0, 0, bytes(7)), FRAME_SIZE_ERROR),
    "ping-on-stream": (frame(PING, 0, 1, bytes(8)), PROTOCOL_ERROR),
    "data-on-stream-0": (frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
    "data-on-idle-stream": (frame(DATA, 0, 5, b"x"), PROTOCOL_ERROR),
    "data-padding-too-long": (HEADERS_1 + frame(DATA, PADDED, 1, b"\x02a"), PROTOCOL_ERROR),
    "rst-on-stream-0": (frame(RST_STREAM, 0, 0, u32(CANCEL)), PROTOCOL_ERROR),
    "priority-on-stream-0": (frame(PRIORITY, 0, 0, bytes(5)), PROTOCOL_ERROR),
    # A stream id not above the last one: a closed stream (RFC 9113 5.1 allows STREAM_CLOSED).
    "stream-id-reused": (HEADERS_1 + frame(RST_STREAM, 0, 1, u32(8)) + HEADERS_1, STREAM_CLOSED),
    "stream-id-lower": (frame(HEADERS, END_HEADERS, 3, BLOCK) + HEADERS_1, STREAM_CLOSED),
    "goaway-shorter-than-8": (frame(GOAWAY, 0, 0, bytes(4)), FRAME_SIZE_ERROR),
}


@pytest.mark.parametrize(("frames", "code"), CONNECTION_ERRORS.values(), ids=CONNECTION_ERRORS)
@in_loop
async def test_connection_errors_close_with_goaway(frames: bytes, code: int) -> None:
    """After a valid opening (the first two cases: instead of it)."""
    client = Client()
    opening = b"" if frames.startswith((PREFACE, b"GET ")) else PREFACE + settings_frame()
    client.send(opening + frames)
    assert client.goaway()[1] == code


@in_loop
async def test_data_beyond_the_connection_window_and_header_block_too_large() -> None:
    client = Client(Limits(connection_window=1000))
    await client.start()
    client.request(1)
    client.send(frame(DATA, 0, 1, bytes(1001)))
    assert client.goaway() == (1, FLOW_CONTROL_ERROR)
    client = Client(Limits(max_header_block=100))
    await client.start()
    client.send(frame(HEADERS, 0, 1, bytes(60)), frame(CONTINUATION, 0, 1, bytes(60)))
    assert client.goaway() == (0, ENHANCE_YOUR_CALM)


# ---------------------------------------------------------------------------- stream errors
@in_loop
async def test_stream_errors_reset_that_stream_only() -> None:
    """A stream above max_concurrent_streams refused; client RST_STREAM (its later DATA
    dropped), DATA above the stream window, a second HEADERS not ending the stream,
    WINDOW_UPDATE of 0, DATA after END_STREAM; a reset from the server's side."""
    client = Client(Limits(stream_window=100, max_concurrent_streams=6))
    await client.start()
    for stream_id in (1, 3, 5, 7, 9, 11, 13):
        client.request(stream_id)
    assert await client.read() == [Frame(RST_STREAM, 0, 13, u32(REFUSED_STREAM))]
    client.send(frame(RST_STREAM, 0, 1, u32(CANCEL)), frame(DATA, 0, 1, b"dropped"))
    client.send(frame(DATA, 0, 3, bytes(101)))
    client.request(5)
    client.send(frame(WINDOW_UPDATE, 0, 7, u32(0)))
    client.send(frame(DATA, END_STREAM, 9, b""), frame(DATA, 0, 9, b"x"))
    assert await client.read() == [
        Frame(RST_STREAM, 0, 3, u32(FLOW_CONTROL_ERROR)),
        Frame(RST_STREAM, 0, 5, u32(PROTOCOL_ERROR)),
        Frame(RST_STREAM, 0, 7, u32(PROTOCOL_ERROR)),
        Frame(RST_STREAM, 0, 9, u32(STREAM_CLOSED)),
    ]
    assert [h.resets for h in client.handlers] == [1] * 5 + [0]
    assert client.handlers[0].received == []
    client.stream(4).reset()  # already reset: nothing more
    client.stream(5).reset()
    assert await client.read() == [Frame(RST_STREAM, 0, 11, u32(CANCEL))]
    assert client.handlers[5].resets == 1
    assert client.connection.streams == {}
    client.request(15)
    assert client.stream(6).id == 15
    assert not client.transport.closed


@in_loop
async def test_header_list_above_the_limit_is_answered_431() -> None:
    """The block still goes through the decoder: its insertions serve the next request."""
    client = Client(Limits(max_header_list_size=200))
    await client.start()
    client.request(1, block=INDEXING + b"\x00\x05x-big\x7f\x01" + b"v" * 128)
    status, reset = await client.read()
    assert status[:3] == (HEADERS, END, 1)
    assert hpack.Decoder().decode(status.payload, 1000) == [(":status", "431")]
    assert reset == Frame(RST_STREAM, 0, 1, u32(NO_ERROR))
    client.request(3, end_stream=True, block=USES_INDEX)
    [handler] = client.handlers
    assert handler.headers == [(":method", "POST"), ("x-small", "1")]


# ---------------------------------------------------------------------------- closing
@in_loop
async def test_connection_lost_resets_every_open_stream() -> None:
    client = Client()
    await client.start()
    client.request(1)
    client.request(3, end_stream=True)
    client.connection.connection_lost(None)
    assert [h.resets for h in client.handlers] == [1, 1]
    assert client.closed == [client.connection]
    client.stream().send_data(b"late")
    assert await client.read() == []


@in_loop
async def test_go_away_closes_once_the_open_streams_are_answered() -> None:
    client = Client()
    await client.start()
    client.request(1, end_stream=True)
    client.connection.go_away()
    assert await client.read() == [Frame(GOAWAY, 0, 0, u32(1) + u32(NO_ERROR))]
    client.request(3, end_stream=True)
    assert await client.read() == [Frame(RST_STREAM, 0, 3, u32(REFUSED_STREAM))]
    assert not client.transport.closed
    client.stream().send_headers(OK, end_stream=True)
    assert client.goaway() == (3, NO_ERROR)
    assert len(client.handlers) == 1


@in_loop
async def test_client_goaway_closes_once_the_open_streams_are_answered() -> None:
    client = Client()
    await client.start()
    client.request(1, end_stream=True)
    client.send(frame(GOAWAY, 0, 0, u32(0) + u32(NO_ERROR)))
    assert not client.transport.closed
    client.stream().send_headers(OK, end_stream=True)
    assert client.goaway() == (1, NO_ERROR)


# ---------------------------------------------------------------------------- after a close
@in_loop
async def test_nothing_is_written_after_the_connection_closes() -> None:
    client = Client()
    await client.start()
    client.send(frame(GOAWAY, 0, 0, bytes(8)), frame(PING, 0, 0, b"pingpong"))
    await client.read()
    assert client.goaway() == (0, NO_ERROR)
    assert parse(bytes(client.transport.after_close)) == []


@in_loop
async def test_trailers_in_flight_after_the_server_reset_are_ignored() -> None:
    """RFC 9113 5.1: frames received on a stream after sending its RST_STREAM are ignored,
    the header block still decoded so that the dynamic table stays in step."""
    client = Client(answer=lambda stream: stream.send_headers(OK, end_stream=True))
    await client.start()
    client.request(1)
    assert (await client.read())[-1] == Frame(RST_STREAM, 0, 1, u32(NO_ERROR))
    client.request(1, end_stream=True, block=INDEXING)
    assert not client.transport.closed
    client.request(3, end_stream=True, block=USES_INDEX)
    assert client.handlers[1].headers == [(":method", "POST"), ("x-small", "1")]


# ---------------------------------------------------------------------------- properties
async def _feed(chunks: list[bytes]) -> None:
    """Small windows and stream limit, and an application answering each stream at once."""
    client = Client(Limits(stream_window=100, max_concurrent_streams=2), answer=answer_at_once)
    await client.start((INITIAL_WINDOW_SIZE, 50))
    for chunk in chunks:
        if client.transport.closed:
            break
        client.send(chunk)
        await asyncio.sleep(0)
    if client.transport.closed:
        client.goaway()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
@example(frame(HEADERS, END, 1, BLOCK) + frame(WINDOW_UPDATE, 0, 1, u32(100)))
def test_arbitrary_bytes_keep_the_connection_or_close_it_with_goaway(data: bytes) -> None:
    """Nothing raises out of data_received; a connection that closes sends GOAWAY last."""
    asyncio.run(_feed([data]))


frame_bytes = st.builds(
    frame,
    st.integers(0, 10),
    st.sampled_from([0, END_STREAM, END_HEADERS, END, PADDED, 0xFF]),
    st.sampled_from([0, 1, 2, 3, 5, 0x80000001]),
    st.sampled_from([BLOCK, TRAILERS, u32(0), u32(1000), bytes(8), b"\x01\x00"]) | st.binary(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(frame_bytes, max_size=10))
def test_arbitrary_frames_keep_the_connection_or_close_it_with_goaway(chunks: list[bytes]) -> None:
    """The same for sequences of well-framed frames of any type, flags and stream."""
    asyncio.run(_feed(chunks))
