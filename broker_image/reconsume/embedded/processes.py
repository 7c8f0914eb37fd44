"""Child processes of embedded mode: name servers, brokers and dead-letter job runs.

Each runs ``python -m reconsume <command> ...`` with the interpreter running embedded mode (so
no ``reconsume`` script needs to be on PATH), its output appended to a log file. A server
prints ``... listening on <address>`` once it accepts connections (and a broker ``serving HTTP
on <address>`` for its metrics, ``serving gRPC on <address>`` for RocketMQ 5's clients);
:meth:`Child.start` waits for that line.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from reconsume.errors import ReconsumeError

log = logging.getLogger(__name__)

_LISTENING = re.compile(r"listening on (\S+)")
_HTTP = re.compile(r"serving HTTP on (\S+)")
_GRPC = re.compile(r"serving gRPC on (\S+)")
PR_SET_PDEATHSIG = 1
TAIL_LINES = 20
"""Lines of a child's output quoted when it fails."""


def _end_with_parent() -> None:
    """In the child, before exec: on Linux, SIGTERM it when embedded mode dies (even by
    SIGKILL), so no broker outlives it holding the ports and store locks the next start needs.
    Elsewhere children of a killed embedded mode must be stopped by hand."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ChildError(ReconsumeError):
    """A child process did not start, or exited."""


class Child:
    """One child process: ``reconsume <args>`` with its output in ``log_path``."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.args = tuple(args)
        self.log_path = log_path
        self.address: str | None = None
        """Where it listens (servers), from its ``listening on`` line."""
        self.http_address: str | None = None
        self.grpc_address: str | None = None
        """A broker's gRPC endpoint (RocketMQ 5's clients), from its ``serving gRPC`` line."""
        self.restarts = 0
        self._process: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._tail: list[str] = []

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    def tail(self) -> str:
        """Its last lines of output."""
        return "".join(self._tail[-TAIL_LINES:])

    async def spawn(self) -> None:
        """Start the process without waiting for it to listen (job runs)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._listening = asyncio.Event()
        self._tail = []
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "reconsume", *self.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Its own process group: a Ctrl-C in the terminal reaches embedded mode only, which
            # then stops its children in order (brokers before their name server).
            start_new_session=True,
            preexec_fn=_end_with_parent,
        )  # fmt: skip
        self._pump = asyncio.create_task(self._copy_output(self._process))

    async def start(self, timeout_s: float = 30.0) -> str:
        """Start a server and wait until it listens; returns its address."""
        await self.spawn()
        waiting = asyncio.create_task(self._listening.wait())
        assert self._pump is not None
        done, _ = await asyncio.wait(
            {waiting, self._pump}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        waiting.cancel()
        if not self._listening.is_set():
            await self.kill()
            why = "exited" if done else f"did not listen within {timeout_s:.0f} s"
            raise ChildError(f"{self.name} {why} (log {self.log_path}):\n{self.tail()}")
        assert self.address is not None
        return self.address

    async def _copy_output(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        with self.log_path.open("a", encoding="utf-8") as out:
            out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} reconsume {' '.join(self.args)}\n")
            out.flush()
            async for raw in process.stdout:
                line = raw.decode("utf-8", "replace")
                out.write(line)
                out.flush()
                self._tail = [*self._tail[-TAIL_LINES:], line]
                if not self._listening.is_set() and (match := _LISTENING.search(line)):
                    self.address = match.group(1)
                    self._listening.set()
                if match := _HTTP.search(line):
                    self.http_address = match.group(1)
                elif match := _GRPC.search(line):
                    self.grpc_address = match.group(1)
        await process.wait()

    async def wait(self) -> int:
        """Wait for it to exit (and its output to be copied); its exit code."""
        assert self._process is not None
        code = await self._process.wait()
        if self._pump is not None:
            await self._pump
        return code

    async def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; its exit code (None if never started)."""
        if self._process is None:
            return None
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._process.wait())
            except TimeoutError:
                log.warning("%s did not stop within %.0f s; killing it", self.name, timeout_s)
                return await self.kill()
        return await self.wait()

    async def kill(self) -> int | None:
        if self._process is None:
            return None
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        return await self.wait()
