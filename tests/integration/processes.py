"""Start reconsume server processes on loopback and wait until they listen."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

RECONSUME = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))
_LISTENING = re.compile(r"listening on (\S+)")
_SERVING_GRPC = re.compile(r"serving gRPC on (\S+)")


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    address: str
    output: list[str] = field(default_factory=list)
    pump: threading.Thread | None = None

    @property
    def grpc_address(self) -> str:
        """The ``ip:port`` a broker started with ``--grpc-listen`` says it serves gRPC on."""
        match = _SERVING_GRPC.search("".join(self.output))
        assert match is not None, "".join(self.output)
        return match.group(1)

    def _release(self) -> None:
        if self.pump is not None:
            self.pump.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM, wait for exit, return the exit code; one still running after
        ``timeout_s`` is killed and the error carries what it printed (a server still
        stopping after 10 s prints the stacks of its threads and tasks)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self._release()  # the pump has read everything once this returns
        tail = "".join(self.output)[-20000:]
        raise TimeoutError(f"{self.process.args} still ran {timeout_s}s after SIGTERM:\n{tail}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._release()


def start_server(
    *args: str, timeout_s: float = 20.0, env: Mapping[str, str] | None = None
) -> ServerProcess:
    """Run ``reconsume <args>`` (with ``env`` added to the environment) and wait for its
    "listening on" line."""
    process = subprocess.Popen(
        [RECONSUME, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = _LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    pumper = threading.Thread(target=pump, daemon=True)
    pumper.start()
    deadline = time.monotonic() + timeout_s
    while not ready.wait(0.05):
        if time.monotonic() > deadline:
            ServerProcess(process, "", lines, pumper).kill()
            raise TimeoutError(f"reconsume {' '.join(args)} did not start: {''.join(lines)}")
    if not found:
        ServerProcess(process, "", lines, pumper).kill()
        raise RuntimeError(f"reconsume {' '.join(args)} exited: {''.join(lines)}")
    return ServerProcess(process, found[0], lines, pumper)


MALFORMED_FRAMES = {
    "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "oversized": struct.pack(">i", 1 << 30),
    "oversized-17MiB": struct.pack(">i", 17 * 1024 * 1024) + b"x" * 64,
    "negative": struct.pack(">i", -5) + b"xxxx",
    "bad-json": struct.pack(">ii", 12, 8) + b"not json",
    "bad-type": struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd",
    "truncated": struct.pack(">ii", 100, 10) + b"short",
}
"""Bytes no server may accept: each must close its connection and nothing else."""


def raw_exchange(address: str, payload: bytes) -> bytes:
    """Send ``payload`` on a fresh socket, half-close, and return everything answered."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)
