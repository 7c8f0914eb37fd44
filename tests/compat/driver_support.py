"""What the client drivers (``java/``: :mod:`.java_client_support`, ``go/``:
:mod:`.go_client_support`) have in common: a scenario run to its end against a
:mod:`tests.compat.servers` cluster, its JSON-lines events read into a :class:`DriverRun`, and
checks of those events."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from .servers import Queue

TAG = "compat"
DRIVER_TIMEOUT_S = 45
"""The test kills a driver after this long; the driver gives up by itself 10 s earlier (exit
2, naming what it still waits for). The Java driver's JVM starts in about a second."""
SLACK_MS = 2
"""Store timestamps are whole milliseconds (see ``retry_support.TIMESTAMP_SLACK_S``)."""

Event = dict[str, Any]


@dataclass
class DriverRun:
    returncode: int
    sequence: list[Event]
    """Every event, in the order printed."""
    events: dict[str, list[Event]]
    """The events by kind, each kind in the order printed."""
    stderr: str
    log: str
    """The client's own log (warnings and errors)."""

    def __getitem__(self, kind: str) -> list[Event]:
        return self.events.get(kind, [])

    def context(self, event: Event, before: int = 30) -> list[Event]:
        """The events printed just before ``event`` (without messages)."""
        at = next(i for i, e in enumerate(self.sequence) if e is event)
        earlier = self.sequence[max(0, at - before) : at + 1]
        return [
            {k: v for k, v in e.items() if k not in ("properties", "queues")}
            for e in earlier
            if e["event"] not in ("sent", "received")
        ]

    def explain(self) -> str:
        tail = {kind: items[-3:] for kind, items in self.events.items() if kind != "error"}
        return (
            f"driver exit {self.returncode}; errors {self['error']}; last events {tail}; "
            f"stderr:\n{self.stderr[-3000:]}\nclient log:\n{self.log[-4000:]}"
        )


class BackgroundDriver:
    """A driver scenario run beside the test, which acts meanwhile (kills a master): its
    events are read as it prints them. Use it as a context manager: the process is killed
    and its pipes are closed at the end, whatever happened."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.events: list[Event] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # one at a time: the test watches the list grow
            self.events.append(json.loads(line))

    def of(self, kind: str) -> list[Event]:
        return [e for e in list(self.events) if e["event"] == kind]

    def finish(self, timeout_s: float, log: Callable[[], str] = str) -> None:
        """Wait for the scenario's end: exit 0 after its "done" event (``log()``, the
        client's own log, is shown when not)."""
        returncode = self.process.wait(timeout_s)
        self._reader.join(10)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert returncode == 0, f"driver exit {returncode}: {stderr[-3000:]}\n{log()[-4000:]}"
        assert self.events, "the driver printed nothing"
        assert self.events[-1]["event"] == "done", self.events[-3:]

    def __enter__(self) -> BackgroundDriver:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


def scenario_args(namesrv: str, timeout_s: float, options: Mapping[str, object]) -> list[str]:
    """A driver's arguments after its scenario: the name server(s), a deadline ``timeout_s`` -
    10 s, and ``options`` as ``--name=value`` (``_`` as ``-``)."""
    return [
        f"--namesrv={namesrv}",
        f"--timeout-ms={int(timeout_s - 10) * 1000}",
        *(f"--{name.replace('_', '-')}={value}" for name, value in options.items()),
    ]


def run_to_end(
    command: list[str], driver: str, timeout_s: float, client_log: Callable[[], str]
) -> DriverRun:
    """Run ``command`` (the ``driver``'s, killed after ``timeout_s``), read its events and then
    ``client_log()``, and assert it finished: exit 0 after its "done" event."""
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        pytest.fail(f"{driver} driver hung past {timeout_s}s; its output:\n{text[-4000:]}")
    sequence: list[Event] = [json.loads(line) for line in completed.stdout.splitlines()]
    events: dict[str, list[Event]] = {}
    for event in sequence:
        events.setdefault(event["event"], []).append(event)
    run = DriverRun(completed.returncode, sequence, events, completed.stderr, client_log())
    assert run.returncode == 0, run.explain()
    assert run["done"], run.explain()
    return run


def position(event: Event) -> Queue:
    """The (broker, queue) a send result names or a message was pulled from."""
    return event["brokerName"], event["queueId"]


def queue_set(queues: Iterable[Event], topic: str) -> set[Queue]:
    """The (broker, queue) pairs of a queue list the driver printed, all of ``topic``."""
    listed = list(queues)
    assert {q["topic"] for q in listed} == {topic}, listed
    found = {(q["brokerName"], q["queueId"]) for q in listed}
    assert len(found) == len(listed), listed
    return found


def once_each(received: Iterable[Event]) -> dict[str, Event]:
    """The received messages by body, asserting no body arrived twice."""
    events = list(received)
    counts = Counter(e["body"] for e in events)
    duplicated = {body: n for body, n in counts.items() if n > 1}
    assert not duplicated, duplicated
    return {e["body"]: e for e in events}
