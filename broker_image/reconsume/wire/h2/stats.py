"""What a gRPC server counts for its metrics: connections, calls by method and status, and the
connection errors it closed connections with (by HTTP/2 error code)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

ERROR_NAMES = {
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}


@dataclass
class TransportStats:
    """Counters since the server started; read by the broker's metrics at each scrape."""

    open_connections: int = 0
    accepted_connections: int = 0
    calls: Counter[tuple[str, int]] = field(default_factory=Counter)
    """(method name, gRPC status code) -> calls ended so; a path the server does not serve
    counts as method ``unknown`` (paths are the client's to choose)."""
    connection_errors: Counter[int] = field(default_factory=Counter)
    """HTTP/2 error code -> connections closed with it."""
