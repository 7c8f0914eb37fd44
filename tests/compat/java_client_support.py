"""Running the Java client driver (``java/``, Apache RocketMQ's rocketmq-client 4.9.8) against
a :mod:`tests.compat.servers` cluster, and reading its JSON-lines events."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconsume.message.names import RETRY_GROUP_TOPIC_PREFIX
from reconsume.wire.codes import RequestCode, ResponseCode

from .conftest import JavaClient
from .servers import Cluster, Queue

TAG = "compat"
DRIVER_TIMEOUT_S = 45
"""The test kills a driver after this long; the driver gives up by itself 10 s earlier (exit
2, naming what it still waits for). A JVM starts in about a second."""
SLACK_MS = 2
"""Store timestamps are whole milliseconds (see ``retry_support.TIMESTAMP_SLACK_S``)."""

Event = dict[str, Any]

CONSUMING = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.HEART_BEAT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.PULL_MESSAGE,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.UNREGISTER_CLIENT,
    }
)
"""Requests a producer and a clustering push consumer make in every scenario."""


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


def run_driver(
    java_client: JavaClient,
    cluster: Cluster,
    scenario: str,
    state_dir: Path,
    **options: object,
) -> DriverRun:
    """Run one scenario to its end (``options`` become ``--name=value``, ``_`` as ``-``) and
    assert it finished: exit 0 after its "done" event."""
    return run_driver_at(java_client, cluster.namesrv.address, scenario, state_dir, **options)


def run_driver_at(
    java_client: JavaClient,
    namesrv: str,
    scenario: str,
    state_dir: Path,
    timeout_s: float = DRIVER_TIMEOUT_S,
    **options: object,
) -> DriverRun:
    """:func:`run_driver` against the name server(s) at ``namesrv``; the driver gives up
    after ``timeout_s`` - 10 s."""
    args = [
        f"--namesrv={namesrv}",
        f"--timeout-ms={int(timeout_s - 10) * 1000}",
        *(f"--{name.replace('_', '-')}={value}" for name, value in options.items()),
    ]
    command = java_client.command(scenario, *args, state_dir=state_dir)
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        pytest.fail(f"Java driver hung past {timeout_s}s; its output:\n{text[-4000:]}")
    sequence = [json.loads(line) for line in completed.stdout.splitlines()]
    events: dict[str, list[Event]] = {}
    for event in sequence:
        events.setdefault(event["event"], []).append(event)
    log_file = state_dir / "logs" / "rocketmq_client.log"
    log = ""
    if log_file.is_file():
        lines = log_file.read_text(errors="replace").splitlines()
        log = "\n".join(line for line in lines if " WARN " in line or " ERROR " in line)
    run = DriverRun(completed.returncode, sequence, events, completed.stderr, log)
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


def check_protocol(run: DriverRun, exercised: Iterable[int], created: Iterable[str] = ()) -> None:
    """The clients made (or, from the brokers, received) every request in ``exercised``, and
    each answer they waited for was SUCCESS, but for

    * the name server's TOPIC_NOT_EXIST for a topic no broker had yet when the client asked:
      the group's retry topic (a consumer asks before the brokers create it, as with RocketMQ's)
      or one of ``created``;
    * SYSTEM_ERROR "no consumer for this group" answering a consumer list asked of a broker the
      consumer had not yet heartbeated to, or had already unregistered from: a rebalance that
      another broker's NOTIFY_CONSUMER_IDS_CHANGED started while the client was starting or
      closing (RocketMQ's broker notifies, and answers, so too).
    """
    made = {e["code"] for e in run["request"]}
    assert made >= set(exercised), {RequestCode(c).name for c in set(exercised) - made}
    not_yet = (RETRY_GROUP_TOPIC_PREFIX, *created)
    registered: set[tuple[str, str]] = set()
    """(client, broker): a heartbeat of the client was answered by the broker."""
    left: set[tuple[str, str]] = set()
    """(client, broker): the client asked the broker to unregister it (a heartbeat racing
    that carries no consumer any more)."""
    unexpected = []
    for e in run.sequence:
        if e["event"] == "request" and e["code"] == RequestCode.UNREGISTER_CLIENT:
            left.add((e["client"], e["remote"]))
        if e["event"] != "response":
            continue
        answer = (e["code"], e["responseCode"])
        if answer == (RequestCode.HEART_BEAT, ResponseCode.SUCCESS):
            registered.add((e["client"], e["remote"]))
        if e["responseCode"] in (None, ResponseCode.SUCCESS):
            continue
        if answer == (RequestCode.GET_ROUTEINFO_BY_TOPIC, ResponseCode.TOPIC_NOT_EXIST) and any(
            f"topic: {topic}" in e["remark"] for topic in not_yet
        ):
            continue
        if (
            answer == (RequestCode.GET_CONSUMER_LIST_BY_GROUP, ResponseCode.SYSTEM_ERROR)
            and e["remark"].startswith("no consumer for this group")
            and ((e["client"], e["remote"]) not in registered or (e["client"], e["remote"]) in left)
        ):
            continue
        unexpected.append(e)
    assert not unexpected, (unexpected, run.context(unexpected[0]) if unexpected else [])
