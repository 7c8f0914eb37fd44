"""What the ali-ons tests share: one name server and two Sync-flush brokers (small commit-log
segments, delay levels in tenths of a second), and ``ali_ons/driver.js`` run to completion
(:func:`run_driver`) or in the background (:class:`DriverProcess`), its JSON-lines events
parsed."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from reconsume.wire.codes import RequestCode, ResponseCode

from ..polling import eventually
from .conftest import NodeProject
from .servers import (
    BROKERS,
    QUEUES_PER_BROKER,
    Cluster,
    compat_cluster,
)
from .servers import committed_at_queue_ends as at_queue_ends

TAG = "compat"
DRIVER_TIMEOUT_S = 40
"""A driver gives up (exit 2, saying so) 10 s before the test kills it."""
REFUSALS = {ResponseCode.SYSTEM_ERROR, ResponseCode.REQUEST_CODE_NOT_SUPPORTED}

Events = dict[str, list[dict[str, Any]]]
T = TypeVar("T")


def ali_ons_cluster(root: Path) -> AbstractContextManager[Cluster]:
    """The compat tier's name server and two brokers, as cluster ``ali-ons``."""
    return compat_cluster(root, cluster_name="ali-ons")


def all_queues() -> list[str]:
    """Every queue of a topic made by :func:`create_topic`, as ali-ons' driver names them."""
    return sorted(f"{b}/{q}" for b in BROKERS for q in range(QUEUES_PER_BROKER))


@dataclass
class DriverRun:
    returncode: int | None
    events: Events
    stderr: str

    def __getitem__(self, kind: str) -> list[dict[str, Any]]:
        return self.events.get(kind, [])

    def explain(self) -> str:
        tail = {kind: items[-3:] for kind, items in self.events.items()}
        return f"driver exit {self.returncode}; last events {tail}; stderr:\n{self.stderr[-4000:]}"


def parse_events(stdout: str) -> Events:
    events: Events = {}
    for line in stdout.splitlines():
        event = json.loads(line)
        events.setdefault(event["event"], []).append(event)
    return events


def driver_command(project: NodeProject, mode: str, options: dict[str, object]) -> list[str]:
    return [
        project.node,
        str(project.script("driver.js")),
        mode,
        *(f"--{name}={value}" for name, value in options.items()),
    ]


def run_driver(project: NodeProject, mode: str, **options: object) -> DriverRun:
    """Run ``driver.js <mode> --option=value ...`` to its end; it must exit 0 with "done"."""
    options.setdefault("timeout-ms", (DRIVER_TIMEOUT_S - 10) * 1000)
    try:
        completed = subprocess.run(
            driver_command(project, mode, options),
            cwd=project.directory,
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        pytest.fail(f"ali-ons driver hung past {DRIVER_TIMEOUT_S}s; its output:\n{text[-4000:]}")
    run = DriverRun(completed.returncode, parse_events(completed.stdout), completed.stderr)
    assert run.returncode == 0, run.explain()
    assert run["done"], run.explain()
    return run


class DriverProcess:
    """``driver.js consume`` in the background: its events as they come, ``close`` on its
    stdin to stop it."""

    def __init__(self, project: NodeProject, **options: object) -> None:
        options.setdefault("timeout-ms", (DRIVER_TIMEOUT_S - 10) * 1000)
        self.process = subprocess.Popen(
            driver_command(project, "consume", options),
            cwd=project.directory,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()
        self._events: Events = {}
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self._lock:
                self._events.setdefault(event["event"], []).append(event)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def snapshot(self) -> DriverRun:
        with self._lock:
            events = {kind: list(items) for kind, items in self._events.items()}
        return DriverRun(self.process.poll(), events, "".join(self._stderr))

    def __getitem__(self, kind: str) -> list[dict[str, Any]]:
        return self.snapshot()[kind]

    def assigned(self, topic: str) -> list[str] | None:
        """The queues of ``topic`` it pulls now (its last "assigned" event), None before any."""
        changes = [e for e in self["assigned"] if e["topic"] == topic]
        return changes[-1]["queues"] if changes else None

    def wait_for(self, probe: Callable[[], T | None], what: str, timeout_s: float = 20.0) -> T:
        """Poll ``probe`` until it returns something truthy; fail if the driver exits first."""

        def running() -> None:
            run = self.snapshot()
            assert run.returncode is None, f"driver exited waiting for {what}: {run.explain()}"

        return eventually(
            probe,
            timeout_s,
            what,
            interval_s=0.02,
            check=running,
            detail=lambda: self.snapshot().explain(),
        )

    def close(self, timeout_s: float = 15.0) -> DriverRun:
        """Ask it to close (it commits offsets and unregisters) and wait for its exit 0."""
        assert self.process.stdin is not None
        if self.process.poll() is None:
            self.process.stdin.write("close\n")
            self.process.stdin.flush()
        self.process.stdin.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._release()
        run = self.snapshot()
        assert run.returncode == 0, run.explain()
        assert run["closed"], run.explain()
        return run

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._release()

    def _release(self) -> None:
        for reader in self._readers:
            reader.join(5)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@contextmanager
def background_consumer(project: NodeProject, **options: object) -> Iterator[DriverProcess]:
    """A background consumer, killed if the test ends without closing it."""
    process = DriverProcess(project, **options)
    try:
        yield process
    finally:
        process.kill()


def check_protocol(run: DriverRun, exercised: Iterable[int]) -> None:
    """Every request in ``exercised`` was made, and the servers refused none."""
    rpcs = run["rpc"]
    assert {e["code"] for e in rpcs} >= set(exercised)
    refused = [e for e in rpcs if e.get("responseCode") in REFUSALS]
    assert not refused, refused
    # Only the pulls the brokers still held when the client closed may end without an answer.
    unanswered = [e for e in rpcs if "error" in e and e["code"] != RequestCode.PULL_MESSAGE]
    assert not unanswered, unanswered


def committed_at_queue_ends(
    cluster: Cluster, group: str, topic: str, queues: int = QUEUES_PER_BROKER
) -> dict[tuple[str, int], tuple[int, int]]:
    """(broker, queue) → (committed, max offset), once every queue's committed offset is at its
    end (:func:`servers.committed_at_queue_ends`; both numbers, as the tests compare them)."""
    ends = at_queue_ends(cluster, group, topic, queues)
    return {queue: (end, end) for queue, end in ends.items()}
