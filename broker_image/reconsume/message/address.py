"""Socket addresses as they appear in stored records and message ids (IPv4 or IPv6 + port)."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from reconsume.errors import InvalidArgumentError

_PORT = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class HostAddress:
    """An IP address (4 or 16 packed bytes) and a port, as records store born and store hosts."""

    ip: bytes
    port: int

    def __post_init__(self) -> None:
        if len(self.ip) not in (4, 16):
            raise InvalidArgumentError(f"host address must be 4 or 16 bytes, got {len(self.ip)}")
        if not 0 <= self.port <= 0x7FFFFFFF:
            raise InvalidArgumentError(f"port {self.port} is out of range")

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    def packed(self) -> bytes:
        """The record form: the address bytes followed by the port as a big-endian int32."""
        return self.ip + _PORT.pack(self.port)

    @classmethod
    def unpack(cls, data: bytes) -> HostAddress:
        """Inverse of :meth:`packed` for 8 (IPv4) or 20 (IPv6) bytes."""
        if len(data) not in (8, 20):
            raise InvalidArgumentError(
                f"packed host address must be 8 or 20 bytes, got {len(data)}"
            )
        return cls(bytes(data[:-4]), _PORT.unpack(data[-4:])[0])

    @classmethod
    def parse(cls, text: str) -> HostAddress:
        """Parse ``1.2.3.4:10911``, ``[::1]:10911`` or RocketMQ's unbracketed ``::1:10911``."""
        host, sep, port_text = text.rpartition(":")
        if not sep or not (port_text.isascii() and port_text.isdigit()):
            raise InvalidArgumentError(f"address {text!r} is not host:port")
        host = host.removeprefix("[").removesuffix("]")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError as exc:
            raise InvalidArgumentError(f"address {text!r} has no valid IP address") from exc
        return cls(ip.packed, int(port_text))

    def __str__(self) -> str:
        ip = ipaddress.ip_address(self.ip)
        return f"[{ip}]:{self.port}" if self.is_v6 else f"{ip}:{self.port}"


LOOPBACK_V4 = HostAddress(b"\x7f\x00\x00\x01", 0)
