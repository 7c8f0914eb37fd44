"""Settings of the name server."""

from __future__ import annotations

from dataclasses import dataclass

from reconsume.errors import InvalidArgumentError


@dataclass(frozen=True, slots=True)
class NamesrvSettings:
    listen_host: str = "127.0.0.1"
    """Address to listen on."""
    listen_port: int = 9876
    """TCP port (0 picks a free one)."""
    broker_expiry_s: float = 120.0
    """A broker not heard from for this many seconds is dropped from routes."""
    scan_interval_s: float = 10.0
    """Seconds between scans for expired brokers."""

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise InvalidArgumentError(f"listen port {self.listen_port} is not 0-65535")
        if self.broker_expiry_s <= 0:
            raise InvalidArgumentError("broker expiry must be positive seconds")
        if self.scan_interval_s <= 0:
            raise InvalidArgumentError("scan interval must be positive seconds")
