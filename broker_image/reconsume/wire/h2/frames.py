"""HTTP/2's frame vocabulary (RFC 9113): frame types, flags, error codes, settings, the
frame header, and the limits a server holds its clients to."""

from __future__ import annotations

import struct
from dataclasses import dataclass

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9

FLAG_END_STREAM = 0x1
FLAG_ACK = 0x1
FLAG_END_HEADERS = 0x4
FLAG_PADDED = 0x8
FLAG_PRIORITY = 0x20

NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6

DEFAULT_WINDOW = 65_535
DEFAULT_FRAME_SIZE = 16_384
MAX_WINDOW = (1 << 31) - 1
MAX_FRAME_SIZE_LIMIT = (1 << 24) - 1

FRAME_HEADER = struct.Struct(">IBI")
"""Length (24 bits) and type (8) as one 32-bit word, flags, stream id."""


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return FRAME_HEADER.pack((len(payload) << 8) | kind, flags, stream_id) + payload


@dataclass(frozen=True)
class Limits:
    """What the server announces and holds its clients to."""

    max_concurrent_streams: int = 4096
    stream_window: int = 1 << 20
    """Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE)."""
    connection_window: int = 16 << 20
    max_header_list_size: int = 64 << 10
    max_header_block: int = 256 << 10
    """Octets of one header block (HEADERS and its CONTINUATIONs) past which the connection
    is closed (ENHANCE_YOUR_CALM): more than a decoded list may hold, however compressed."""


class ConnectionError_(Exception):
    """A connection error: GOAWAY with ``code``, then the connection closes."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


DEFAULT_LIMITS = Limits()
