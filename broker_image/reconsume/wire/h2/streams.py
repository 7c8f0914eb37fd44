"""The sending side of an HTTP/2 server connection: the streams an application answers, and
the frames they become under both flow-control windows (RFC 9113 5.2, 6.9).

Writes are gathered: frames written while the loop runs one callback (a request's data, the
calls it completes, the answers of those completed in the same turn) leave in one
``transport.writelines`` when the loop next runs its ready callbacks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Protocol

from reconsume.wire.h2.frames import (
    CANCEL,
    CONTINUATION,
    DATA,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    HEADERS,
    NO_ERROR,
    RST_STREAM,
    Limits,
    frame,
)
from reconsume.wire.h2.hpack import Header

RESET_IDS_KEPT = 1024


class StreamHandler(Protocol):
    """What the application keeps for one open request stream."""

    def data(self, payload: bytes, end_stream: bool) -> None:
        """Request data (flow control already credited), and whether the client is done."""

    def reset(self) -> None:
        """The stream ended without a response: reset by the client, or the connection
        lost. Nothing may be sent on it any more."""


class Application(Protocol):
    def open(self, stream: Stream, headers: list[Header], end_stream: bool) -> StreamHandler:
        """A new request stream with its headers."""


class Stream:
    """One request stream: what the application answers it with."""

    __slots__ = (
        "connection",
        "handler",
        "id",
        "local_closed",
        "pending",
        "receive_credit",
        "receive_window",
        "remote_closed",
        "send_window",
    )

    def __init__(self, connection: Sender, stream_id: int, send_window: int) -> None:
        self.connection = connection
        self.id = stream_id
        self.send_window = send_window
        self.receive_window = connection.limits.stream_window
        self.receive_credit = 0
        """Octets received and not yet given back by WINDOW_UPDATE."""
        self.remote_closed = False
        self.local_closed = False
        self.pending: deque[tuple[bool, bytes, bool]] = deque()
        """Frames waiting for send window: (is headers, payload or block, end stream)."""
        self.handler: StreamHandler | None = None

    def send_headers(self, block: bytes, end_stream: bool = False) -> None:
        if self.local_closed:
            return
        if self.pending:
            self.pending.append((True, block, end_stream))
            return
        self.connection.write_headers(self, block, end_stream)

    def send_data(self, payload: bytes, end_stream: bool = False) -> None:
        if self.local_closed:
            return
        if self.pending:
            self.pending.append((False, payload, end_stream))
            return
        self.connection.write_data(self, payload, end_stream)

    def reset(self, code: int = CANCEL) -> None:
        """Reset the stream from the server's side."""
        self.connection.reset_stream(self, code)


class Sender:
    """What a connection sends: frames gathered per turn of the loop, DATA held back by the
    windows. :class:`~reconsume.wire.h2.connection.H2Connection` sets the state up and
    reads the client's frames."""

    limits: Limits
    peer: str
    """``ipv4:host:port`` or ``ipv6:[host]:port``, as gRPC names a peer."""
    transport: asyncio.Transport | None
    streams: dict[int, Stream]
    going_away: bool
    _loop: asyncio.AbstractEventLoop | None
    _out: list[bytes]
    _flush_scheduled: bool
    _send_window: int
    _peer_frame_size: int
    _blocked: dict[int, Stream]
    _reset_ids: dict[int, None]

    def close(self, code: int, message: str) -> None:
        raise NotImplementedError

    def _write(self, data: bytes) -> None:
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.transport is not None and self._out:
            self.transport.writelines(self._out)
        self._out.clear()

    def write_headers(self, stream: Stream, block: bytes, end_stream: bool) -> None:
        flags = FLAG_END_HEADERS | (FLAG_END_STREAM if end_stream else 0)
        if len(block) <= self._peer_frame_size:
            self._write(frame(HEADERS, flags, stream.id, block))
        else:
            size = self._peer_frame_size
            first_flags = FLAG_END_STREAM if end_stream else 0
            self._write(frame(HEADERS, first_flags, stream.id, block[:size]))
            for start in range(size, len(block), size):
                last = start + size >= len(block)
                flags = FLAG_END_HEADERS if last else 0
                self._write(frame(CONTINUATION, flags, stream.id, block[start : start + size]))
        if end_stream:
            self._local_end(stream)

    def write_data(self, stream: Stream, payload: bytes, end_stream: bool) -> None:
        """Send what the windows allow now; the rest waits in ``stream.pending``."""
        length = len(payload)
        if (
            length <= stream.send_window
            and length <= self._send_window
            and (length <= self._peer_frame_size)
        ):
            stream.send_window -= length
            self._send_window -= length
            self._write(frame(DATA, FLAG_END_STREAM if end_stream else 0, stream.id, payload))
            if end_stream:
                self._local_end(stream)
            return
        self._write_some(stream, payload, end_stream)

    def _write_some(self, stream: Stream, payload: bytes, end_stream: bool) -> bool:
        """Write ``payload`` in frames as far as the windows go; True when all of it went."""
        view = memoryview(payload)
        while True:
            size = min(len(view), stream.send_window, self._send_window, self._peer_frame_size)
            if size < len(view) and size <= 0:
                stream.pending.appendleft((False, bytes(view), end_stream))
                self._blocked[stream.id] = stream
                return False
            last = size == len(view)
            flags = FLAG_END_STREAM if last and end_stream else 0
            self._write(frame(DATA, flags, stream.id, bytes(view[:size])))
            stream.send_window -= size
            self._send_window -= size
            view = view[size:]
            if last:
                if end_stream:
                    self._local_end(stream)
                return True

    def _unblock(self, streams: list[Stream]) -> None:
        for stream in streams:
            self._blocked.pop(stream.id, None)
            pending = stream.pending
            while pending and self.transport is not None:
                is_headers, payload, end_stream = pending.popleft()
                if is_headers:
                    self.write_headers(stream, payload, end_stream)
                elif not self._write_some(stream, payload, end_stream):
                    break
            if self._send_window <= 0:
                return

    def _local_end(self, stream: Stream) -> None:
        stream.local_closed = True
        stream.pending.clear()
        self._blocked.pop(stream.id, None)
        if not stream.remote_closed:
            # The answer is complete: the client need send nothing more (RFC 9113 8.1).
            self._write(frame(RST_STREAM, 0, stream.id, NO_ERROR.to_bytes(4, "big")))
            self._remember_reset(stream.id)
        self._forget(stream)

    def _remember_reset(self, stream_id: int) -> None:
        if len(self._reset_ids) >= RESET_IDS_KEPT:
            del self._reset_ids[next(iter(self._reset_ids))]
        self._reset_ids[stream_id] = None

    def _forget(self, stream: Stream) -> None:
        if self.streams.pop(stream.id, None) is not None:
            self._blocked.pop(stream.id, None)
        if self.going_away and not self.streams:
            self.close(NO_ERROR, "")

    def reset_stream(self, stream: Stream, code: int) -> None:
        if stream.id not in self.streams:
            return
        handler = stream.handler
        stream.local_closed = stream.remote_closed = True
        stream.pending.clear()
        self._write(frame(RST_STREAM, 0, stream.id, code.to_bytes(4, "big")))
        self._remember_reset(stream.id)
        self._forget(stream)
        if handler is not None:
            handler.reset()
