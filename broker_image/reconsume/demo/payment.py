"""The demo's payment service: a small HTTP service on loopback that can be down.

``POST /charge/<order>`` answers 200 when the service is up, 503 while it is down, and 422 for
an order from the retired legacy checkout, which no payment will ever accept. The consumer
calls it over a real connection, as a consumer calls its downstream service.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

OK, UNAVAILABLE, UNPROCESSABLE = 200, 503, 422
_REASONS = {OK: "OK", UNAVAILABLE: "Service Unavailable", UNPROCESSABLE: "Unprocessable Entity"}


@dataclass(slots=True)
class Ledger:
    charged: set[str]
    refused: int = 0


class PaymentService:
    def __init__(self) -> None:
        self.up = False
        self.ledger = Ledger(set())
        self._server: asyncio.Server | None = None
        self.address = ""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = f"{host}:{port}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def answer(self, order: str, legacy: bool) -> int:
        if not self.up:
            self.ledger.refused += 1
            return UNAVAILABLE
        if legacy:
            self.ledger.refused += 1
            return UNPROCESSABLE
        self.ledger.charged.add(order)
        return OK

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            request = await reader.readuntil(b"\r\n\r\n")
            method, path, _ = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
            parts = path.strip("/").split("/")
            if method != "POST" or len(parts) != 3 or parts[0] != "charge":
                code = 404
            else:
                code = self.answer(parts[1], legacy=parts[2] == "legacy")
            reason = _REASONS.get(code, "Not Found")
            head = f"HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            writer.write(head.encode())
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def charge(address: str, order: str, checkout: str) -> int:
    """Ask the service at ``address`` to charge ``order``; the HTTP status."""
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"POST /charge/{order}/{checkout} HTTP/1.1\r\nHost: {address}\r\n"
                     "Content-Length: 0\r\n\r\n".encode())  # fmt: skip
        await writer.drain()
        status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
