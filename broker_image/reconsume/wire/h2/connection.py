"""One HTTP/2 server connection (RFC 9113): frames, streams and flow control, for an
:class:`Application` that answers each request stream.

What a gRPC server needs and no more: no server push, no priorities (PRIORITY frames and
fields are read and ignored, as the RFC allows), and header blocks of its own encoded without
the dynamic table (:mod:`reconsume.wire.h2.hpack`). A connection error (a frame that breaks
the protocol, a header block that does not decode, a window overrun) answers GOAWAY with its
code and closes this connection only; a stream error resets that stream only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import cast

from reconsume.wire.h2.frames import (
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    DEFAULT_FRAME_SIZE,
    DEFAULT_LIMITS,
    DEFAULT_WINDOW,
    ENHANCE_YOUR_CALM,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    FLAG_PRIORITY,
    FLOW_CONTROL_ERROR,
    FRAME_HEADER,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    MAX_FRAME_SIZE_LIMIT,
    MAX_WINDOW,
    NO_ERROR,
    PING,
    PREFACE,
    PRIORITY,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    REFUSED_STREAM,
    RST_STREAM,
    SETTINGS,
    SETTINGS_ENABLE_PUSH,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_CONCURRENT_STREAMS,
    SETTINGS_MAX_FRAME_SIZE,
    SETTINGS_MAX_HEADER_LIST_SIZE,
    STREAM_CLOSED,
    WINDOW_UPDATE,
    ConnectionError_,
    Limits,
    frame,
)
from reconsume.wire.h2.hpack import Decoder, HeaderListTooLarge, HpackError
from reconsume.wire.h2.hpack import encode as encode_headers
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.h2.streams import Application, Sender, Stream
from reconsume.wire.listen import peer_host_port

log = logging.getLogger(__name__)


class H2Connection(Sender, asyncio.Protocol):
    """The server side of one HTTP/2 connection."""

    def __init__(
        self,
        application: Application,
        limits: Limits = DEFAULT_LIMITS,
        closed: Callable[[H2Connection], None] = lambda _connection: None,
        stats: TransportStats | None = None,
    ) -> None:
        self.application = application
        self.limits = limits
        self._closed = closed
        self._stats = stats
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        """``ipv4:host:port`` or ``ipv6:[host]:port``, as gRPC names a peer."""
        self.streams: dict[int, Stream] = {}
        self._buffer = bytearray()
        self._preface = False
        self._settings_seen = False
        self._decoder = Decoder()
        self._last_stream_id = 0
        self._headers: tuple[int, int, bytearray] | None = None
        """A header block waiting for its CONTINUATIONs: stream id, HEADERS flags, octets."""
        self._peer_window = DEFAULT_WINDOW
        self._peer_frame_size = DEFAULT_FRAME_SIZE
        self._send_window = DEFAULT_WINDOW
        self._receive_window = limits.connection_window
        self._receive_credit = 0
        self._reset_ids: dict[int, None] = {}
        """Streams the server ended before the client did, the latest
        :data:`RESET_IDS_KEPT`: frames the client sent before it saw the reset are dropped
        (RFC 9113 5.1), not taken for a protocol error."""
        self._blocked: dict[int, Stream] = {}
        """Streams with frames waiting for send window, in the order they blocked."""
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.going_away = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ transport events
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self._loop = asyncio.get_running_loop()
        peername = transport.get_extra_info("peername")
        peer = peer_host_port(peername)
        if peer is not None:
            host, port = peer
            self.peer = f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
        else:
            self.peer = f"unix:{peername}"
        limits = self.limits
        settings = struct.pack(
            ">HIHIHI",
            SETTINGS_MAX_CONCURRENT_STREAMS,
            limits.max_concurrent_streams,
            SETTINGS_INITIAL_WINDOW_SIZE,
            limits.stream_window,
            SETTINGS_MAX_HEADER_LIST_SIZE,
            limits.max_header_list_size,
        )
        self._write(frame(SETTINGS, 0, 0, settings))
        if limits.connection_window > DEFAULT_WINDOW:
            increment = limits.connection_window - DEFAULT_WINDOW
            self._write(frame(WINDOW_UPDATE, 0, 0, increment.to_bytes(4, "big")))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._out.clear()
        streams = list(self.streams.values())
        self.streams.clear()
        self._blocked.clear()
        for stream in streams:
            stream.local_closed = True
            if stream.handler is not None:
                stream.handler.reset()
        self._closed(self)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:  # closed by the server: what else arrives is dropped
            return
        self._buffer += data
        try:
            if self._preface or self._read_preface():
                self._read_frames()
        except ConnectionError_ as error:
            self.close(error.code, str(error))

    def _read_preface(self) -> bool:
        """Whether the client's connection preface has arrived (and is taken off the
        buffer); anything else is a connection error."""
        buffer = self._buffer
        if len(buffer) < len(PREFACE):
            if not PREFACE.startswith(bytes(buffer)):
                raise ConnectionError_(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
            return False
        if buffer[: len(PREFACE)] != PREFACE:
            raise ConnectionError_(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
        del buffer[: len(PREFACE)]
        self._preface = True
        return True

    def _read_frames(self) -> None:
        buffer = self._buffer
        position = 0
        end = len(buffer)
        unpack = FRAME_HEADER.unpack_from
        while end - position >= 9:
            word, flags, stream_id = unpack(buffer, position)
            length = word >> 8
            if length > DEFAULT_FRAME_SIZE:
                raise ConnectionError_(
                    FRAME_SIZE_ERROR, f"a frame of {length} octets above {DEFAULT_FRAME_SIZE}"
                )
            if end - position - 9 < length:
                break
            payload = bytes(buffer[position + 9 : position + 9 + length])
            position += 9 + length
            self._frame(word & 0xFF, flags, stream_id & MAX_WINDOW, payload)
            if self.transport is None:
                return
        del buffer[:position]

    # ------------------------------------------------------------------ frames
    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._headers is not None and kind != CONTINUATION:
            raise ConnectionError_(PROTOCOL_ERROR, "a header block interrupted by another frame")
        if not self._settings_seen and kind != SETTINGS:
            raise ConnectionError_(PROTOCOL_ERROR, "the client's first frame is not SETTINGS")
        if kind == DATA:
            self._data(flags, stream_id, payload)
        elif kind == HEADERS:
            self._headers_frame(flags, stream_id, payload)
        elif kind == CONTINUATION:
            self._continuation(flags, stream_id, payload)
        elif kind == WINDOW_UPDATE:
            self._window_update(stream_id, payload)
        elif kind == PING:
            if stream_id != 0:
                raise ConnectionError_(PROTOCOL_ERROR, "PING on a stream")
            if len(payload) != 8:
                raise ConnectionError_(FRAME_SIZE_ERROR, "PING of other than 8 octets")
            if not flags & FLAG_ACK:
                self._write(frame(PING, FLAG_ACK, 0, payload))
        elif kind == SETTINGS:
            self._settings(flags, stream_id, payload)
        elif kind == RST_STREAM:
            self._rst_stream(stream_id, payload)
        elif kind == GOAWAY:
            if stream_id != 0:
                raise ConnectionError_(PROTOCOL_ERROR, "GOAWAY on a stream")
            if len(payload) < 8:
                raise ConnectionError_(FRAME_SIZE_ERROR, "GOAWAY shorter than 8 octets")
            self.going_away = True
            if not self.streams:
                self.close(NO_ERROR, "")
        elif kind == PRIORITY:
            if stream_id == 0:
                raise ConnectionError_(PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                raise ConnectionError_(FRAME_SIZE_ERROR, "PRIORITY of other than 5 octets")
        elif kind == PUSH_PROMISE:
            raise ConnectionError_(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # any other type is an extension: ignored, as the RFC asks

    def _settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id != 0:
            raise ConnectionError_(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & FLAG_ACK:
            if payload:
                raise ConnectionError_(FRAME_SIZE_ERROR, "SETTINGS acknowledgement with a payload")
            return
        if len(payload) % 6:
            raise ConnectionError_(FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6")
        self._settings_seen = True
        for position in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HI", payload, position)
            if key == SETTINGS_INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionError_(FLOW_CONTROL_ERROR, f"initial window {value}")
                delta = value - self._peer_window
                self._peer_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise ConnectionError_(FLOW_CONTROL_ERROR, "a stream window overflows")
            elif key == SETTINGS_MAX_FRAME_SIZE:
                if not DEFAULT_FRAME_SIZE <= value <= MAX_FRAME_SIZE_LIMIT:
                    raise ConnectionError_(PROTOCOL_ERROR, f"max frame size {value}")
                self._peer_frame_size = value
            elif key == SETTINGS_ENABLE_PUSH and value > 1:
                raise ConnectionError_(PROTOCOL_ERROR, f"enable push {value}")
        self._write(frame(SETTINGS, FLAG_ACK, 0))
        if self._blocked:
            self._unblock(list(self._blocked.values()))

    def _headers_frame(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0 or not stream_id & 1:
            raise ConnectionError_(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
        start = 0
        end = len(payload)
        if flags & FLAG_PADDED:
            if not payload:
                raise ConnectionError_(FRAME_SIZE_ERROR, "padded HEADERS without a pad length")
            start = 1
            end -= payload[0]
        if flags & FLAG_PRIORITY:
            start += 5
        if end < start:
            raise ConnectionError_(PROTOCOL_ERROR, "HEADERS padding past its payload")
        fragment = payload[start:end] if start or end != len(payload) else payload
        if flags & FLAG_END_HEADERS:
            self._header_block(stream_id, flags, fragment)
        else:
            self._headers = (stream_id, flags, bytearray(fragment))

    def _continuation(self, flags: int, stream_id: int, payload: bytes) -> None:
        if self._headers is None or self._headers[0] != stream_id:
            raise ConnectionError_(PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        block = self._headers[2]
        block += payload
        if len(block) > self.limits.max_header_block:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "a header block too large")
        if flags & FLAG_END_HEADERS:
            headers_flags = self._headers[1]
            self._headers = None
            self._header_block(stream_id, headers_flags, bytes(block))

    def _header_block(self, stream_id: int, flags: int, block: bytes) -> None:
        end_stream = bool(flags & FLAG_END_STREAM)
        too_large = False
        try:
            headers = self._decoder.decode(block, self.limits.max_header_list_size)
        except HeaderListTooLarge:
            headers = []
            too_large = True
        except HpackError as exc:
            raise ConnectionError_(COMPRESSION_ERROR, str(exc)) from None
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers of a request: they end it
            if stream.remote_closed:
                raise ConnectionError_(STREAM_CLOSED, f"HEADERS on closed stream {stream_id}")
            if not end_stream:
                self.reset_stream(stream, PROTOCOL_ERROR)
                return
            self._remote_end(stream, b"")
            return
        if stream_id <= self._last_stream_id:
            if stream_id in self._reset_ids:  # sent before the client saw the reset
                return
            raise ConnectionError_(STREAM_CLOSED, f"HEADERS on closed stream {stream_id}")
        self._last_stream_id = stream_id
        if self.going_away:
            self._write(frame(RST_STREAM, 0, stream_id, REFUSED_STREAM.to_bytes(4, "big")))
            return
        if len(self.streams) >= self.limits.max_concurrent_streams:
            self._write(frame(RST_STREAM, 0, stream_id, REFUSED_STREAM.to_bytes(4, "big")))
            return
        stream = Stream(self, stream_id, self._peer_window)
        stream.remote_closed = end_stream
        self.streams[stream_id] = stream
        if too_large:
            self.write_headers(stream, _STATUS_431, True)
            return
        stream.handler = self.application.open(stream, headers, end_stream)

    def _data(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "DATA on stream 0")
        length = len(payload)
        if length > self._receive_window:
            raise ConnectionError_(FLOW_CONTROL_ERROR, "DATA beyond the connection's window")
        self._receive_window -= length
        self._receive_credit += length
        if self._receive_credit >= self.limits.connection_window // 2:
            self._write(frame(WINDOW_UPDATE, 0, 0, self._receive_credit.to_bytes(4, "big")))
            self._receive_window += self._receive_credit
            self._receive_credit = 0
        if flags & FLAG_PADDED:
            if not payload or payload[0] >= length:
                raise ConnectionError_(PROTOCOL_ERROR, "DATA padding past its payload")
            payload = payload[1 : length - payload[0]]
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id > self._last_stream_id:
                raise ConnectionError_(PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            return  # a stream already answered or reset: its data is dropped
        if stream.remote_closed:
            self.reset_stream(stream, STREAM_CLOSED)
            return
        if length > stream.receive_window:
            self.reset_stream(stream, FLOW_CONTROL_ERROR)
            return
        stream.receive_window -= length
        end_stream = bool(flags & FLAG_END_STREAM)
        if not end_stream:
            stream.receive_credit += length
            if stream.receive_credit >= self.limits.stream_window // 2:
                credit = stream.receive_credit
                self._write(frame(WINDOW_UPDATE, 0, stream_id, credit.to_bytes(4, "big")))
                stream.receive_window += credit
                stream.receive_credit = 0
            if stream.handler is not None:
                stream.handler.data(payload, False)
            return
        self._remote_end(stream, payload)

    def _remote_end(self, stream: Stream, payload: bytes) -> None:
        stream.remote_closed = True
        if stream.local_closed:
            self._forget(stream)
        if stream.handler is not None:
            stream.handler.data(payload, True)

    def _window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "WINDOW_UPDATE of other than 4 octets")
        increment = int.from_bytes(payload, "big") & MAX_WINDOW
        if stream_id == 0:
            if increment == 0:
                raise ConnectionError_(PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise ConnectionError_(FLOW_CONTROL_ERROR, "the connection window overflows")
            if self._blocked:
                self._unblock(list(self._blocked.values()))
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id > self._last_stream_id:
                raise ConnectionError_(PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
            return
        if increment == 0:
            self.reset_stream(stream, PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self.reset_stream(stream, FLOW_CONTROL_ERROR)
            return
        if stream.pending:
            self._unblock([stream])

    def _rst_stream(self, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "RST_STREAM of other than 4 octets")
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id > self._last_stream_id:
                raise ConnectionError_(PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
            return
        stream.local_closed = stream.remote_closed = True
        self._forget(stream)
        if stream.handler is not None:
            stream.handler.reset()

    def go_away(self) -> None:
        """Take no new stream; close once the open ones are answered."""
        if self.transport is None or self.going_away:
            return
        self.going_away = True
        payload = struct.pack(">II", self._last_stream_id, NO_ERROR)
        self._write(frame(GOAWAY, 0, 0, payload))
        if not self.streams:
            self.close(NO_ERROR, "")

    def close(self, code: int, message: str) -> None:
        """GOAWAY with ``code`` (and ``message`` as its debug data), then close."""
        transport = self.transport
        if transport is None:
            return
        if code != NO_ERROR:
            if self._stats is not None:
                self._stats.connection_errors[code] += 1
            log.info("HTTP/2 connection from %s closed: %s (error %d)", self.peer, message, code)
        payload = struct.pack(">II", self._last_stream_id, code) + message.encode()[:256]
        self._out.append(frame(GOAWAY, 0, 0, payload))
        self._flush()
        self.transport = None
        transport.close()


_STATUS_431 = encode_headers([(":status", "431")])
"""The answer to a request whose header list is above the limit (431: Request Header Fields
Too Large)."""
