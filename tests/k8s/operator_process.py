"""``reconsume operator`` as subprocesses of a test: started with the control plane's
kubeconfig, each with its own /metrics port and log file, killed or stopped by the test, and
all stopped (SIGTERM, then SIGKILL) when the test ends."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from ..polling import eventually
from .control_plane import ControlPlane, free_ports, log_tail

SCRIPT = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))
DRIFT_S = 2.0
"""The drift interval of these operators."""
BACKOFF_MAX_S = 4.0
"""Their longest delay before retrying a failed reconcile (the first is 2 s)."""
STOP_TIMEOUT_S = 30.0

T = TypeVar("T")


@dataclass
class OperatorProcess:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    metrics_port: int

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_count(self, text: str) -> int:
        return self.log_text().count(text)

    def reconciles(self, kind: str, result: str = "ok") -> float | None:
        """``reconsume_operator_reconcile_total{kind, result}`` from its /metrics: 0 when the
        series does not exist yet, None when /metrics does not answer."""
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as response:
                text = response.read().decode()
        except (urllib.error.URLError, OSError):
            return None
        series = f'reconsume_operator_reconcile_total{{kind="{kind}",result="{result}"}}'
        match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye in the peering object."""
        self.popen.kill()
        self.popen.wait()

    def stop(self) -> int:
        """SIGTERM and wait; the exit code (SIGKILL after :data:`STOP_TIMEOUT_S`)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise

    def tail(self, lines: int = 60) -> str:
        return f"== operator {self.name} ({self.log}):\n{log_tail(self.log, lines)}"


class Operators:
    """Starts operators watching one namespace; :meth:`close` stops those still running."""

    def __init__(self, control_plane: ControlPlane, namespace: str, workdir: Path) -> None:
        self.control_plane = control_plane
        self.namespace = namespace
        self.workdir = workdir
        self.started: list[OperatorProcess] = []

    def start(self, name: str, *args: str) -> OperatorProcess:
        """``reconsume operator -n NS --verbose`` with a short drift interval and backoff, a
        free metrics port, no liveness endpoint, and ``args``."""
        (metrics_port,) = free_ports(1)
        log = self.workdir / f"operator-{name}.log"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.control_plane.kubeconfig),
            "RECONSUME_BACKOFF_MAX_SECONDS": str(BACKOFF_MAX_S),
        }
        command = [
            SCRIPT, "operator", "--namespace", self.namespace, "--verbose",
            "--metrics-port", str(metrics_port), "--liveness-port", "0",
            "--drift-seconds", str(DRIFT_S), *args,
        ]  # fmt: skip
        with log.open("wb") as out:
            popen = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        process = OperatorProcess(name, popen, log, metrics_port)
        self.started.append(process)
        return process

    def tails(self) -> str:
        return "\n\n".join(p.tail() for p in self.started)

    def wait(self, probe: Callable[[], T | None], timeout_s: float, what: str) -> T:
        """Poll ``probe`` until it returns something truthy; fail after ``timeout_s`` with the
        end of every operator's log."""
        return eventually(probe, timeout_s, what, interval_s=0.1, detail=self.tails)

    def close(self) -> None:
        for process in self.started:
            if process.popen.poll() is None:
                process.stop()


@pytest.fixture
def operators(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Operators]:
    started = Operators(control_plane, namespace, tmp_path)
    try:
        yield started
    finally:
        started.close()
