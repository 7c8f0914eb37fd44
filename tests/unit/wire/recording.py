"""A transport that records what a Connection writes, for tests of what leaves and when."""

from __future__ import annotations

from typing import Any


class RecordingTransport:
    """Records each write (enough of asyncio.Transport for a Connection)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def close(self) -> None:
        pass
