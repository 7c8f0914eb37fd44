"""ali-ons (the npm RocketMQ client, unchanged) produces and consumes through one reconsume name
server and two Sync-flush brokers on 127.0.0.1.

The Node side is ``ali_ons/driver.js``: it prints one JSON line per event (sends, receptions,
every request it made with the answer's code), which this test checks against what the brokers
hold, read with our own protocol-level client.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconsume.wire.codes import RequestCode, ResponseCode

from ..integration.processes import ServerProcess, start_server
from ..integration.wire_client import BrokerClient, eventually, ok
from .conftest import NodeProject

COUNT = 1000
RESUMED_COUNT = 200
TOPIC = "ali-ons-compat"
GROUP = "GID_ali_ons_compat"
TAG = "compat"
QUEUES_PER_BROKER = 4
BROKERS = ("broker-a", "broker-b")
DRIVER_TIMEOUT_S = 40
"""The driver gives up (exit 2, saying what is missing) 10 s before the test kills it; two runs
and their offset checks stay within pytest's 120 s even when both time out."""

EXERCISED = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.HEART_BEAT,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    RequestCode.QUERY_CONSUMER_OFFSET,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.PULL_MESSAGE,
    RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.UNREGISTER_CLIENT,
}
"""Requests ali-ons makes in this scenario."""
REFUSALS = {ResponseCode.SYSTEM_ERROR, ResponseCode.REQUEST_CODE_NOT_SUPPORTED}


@dataclass
class Cluster:
    namesrv: ServerProcess
    brokers: dict[str, ServerProcess] = field(default_factory=dict)


def start_broker(namesrv: str, name: str, store: Path) -> ServerProcess:
    return start_server(
        "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv, "--store-dir", str(store),
        "--broker-name", name, "--cluster", "ali-ons", "--flush", "Sync",
    )  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    cluster = Cluster(namesrv)
    try:
        for name in BROKERS:
            cluster.brokers[name] = start_broker(namesrv.address, name, tmp_path / name)
        yield cluster
    finally:
        for broker in cluster.brokers.values():
            assert broker.stop() == 0, "".join(broker.output)
        assert namesrv.stop() == 0, "".join(namesrv.output)


async def create_topic(cluster: Cluster) -> None:
    """The topic with 4 queues on each broker, visible in the name server's route."""
    async with BrokerClient() as admin:
        for broker in cluster.brokers.values():
            ok(await admin.create_topic(broker.address, TOPIC, QUEUES_PER_BROKER))

        async def routed() -> bool:
            route = await admin.route(cluster.namesrv.address, TOPIC) or {}
            queues = {q["brokerName"]: q["writeQueueNums"] for q in route.get("queueDatas", [])}
            return queues == dict.fromkeys(BROKERS, QUEUES_PER_BROKER)

        await eventually(routed, what=f"route of {TOPIC} on both brokers")


@dataclass
class DriverRun:
    returncode: int
    events: dict[str, list[dict[str, Any]]]
    stderr: str

    def __getitem__(self, kind: str) -> list[dict[str, Any]]:
        return self.events.get(kind, [])

    def explain(self) -> str:
        tail = {kind: items[-3:] for kind, items in self.events.items()}
        return f"driver exit {self.returncode}; last events {tail}; stderr:\n{self.stderr[-4000:]}"


def run_driver(project: NodeProject, namesrv: str, count: int, prefix: str) -> DriverRun:
    command = [
        project.node,
        str(project.script("driver.js")),
        f"--namesrv={namesrv}",
        f"--topic={TOPIC}",
        f"--group={GROUP}",
        f"--count={count}",
        f"--tag={TAG}",
        f"--prefix={prefix}",
        f"--timeout-ms={(DRIVER_TIMEOUT_S - 10) * 1000}",
    ]
    try:
        completed = subprocess.run(
            command,
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
    events: dict[str, list[dict[str, Any]]] = {}
    for line in completed.stdout.splitlines():
        event = json.loads(line)
        events.setdefault(event["event"], []).append(event)
    run = DriverRun(completed.returncode, events, completed.stderr)
    assert run.returncode == 0, run.explain()
    assert run["done"], run.explain()
    return run


def check_protocol(run: DriverRun) -> None:
    """Every request the scenario needs was made, and the servers refused none."""
    rpcs = run["rpc"]
    assert {e["code"] for e in rpcs} >= EXERCISED
    refused = [e for e in rpcs if e.get("responseCode") in REFUSALS]
    assert not refused, refused
    # Only the pulls the brokers still held when the client closed may end without an answer.
    unanswered = [e for e in rpcs if "error" in e and e["code"] != RequestCode.PULL_MESSAGE]
    assert not unanswered, unanswered


def check_delivery(run: DriverRun) -> None:
    """Every body sent received exactly once, with tag, keys and user properties as sent, from
    the queue and offset the send reported, under the message id the send returned; bodies over
    4 KiB were compressed by the producer and arrive flagged so."""
    sent, received = run["sent"], run["received"]
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert len({s["msgId"] for s in sent}) == len(sent)
    assert len({(s["brokerName"], s["queueId"], s["queueOffset"]) for s in sent}) == len(sent)
    assert Counter(r["body"] for r in received) == Counter(s["body"] for s in sent)
    by_body = {r["body"]: r for r in received}
    for s in sent:
        r = by_body[s["body"]]
        assert (r["topic"], r["tags"], r["keys"]) == (TOPIC, TAG, f"key-{s['index']}")
        assert r["properties"]["index"] == str(s["index"])
        assert r["reconsumeTimes"] == 0
        assert r["compressed"] == (len(s["body"]) > 4096)
        assert r["msgId"] == s["msgId"]
        placed = (r["brokerName"], r["queueId"], r["queueOffset"])
        assert placed == (s["brokerName"], s["queueId"], s["queueOffset"])


async def queue_offsets(cluster: Cluster) -> dict[tuple[str, int], tuple[int, int]]:
    """(broker, queue) → (the group's committed offset or -1, the queue's max offset)."""
    found = {}
    async with BrokerClient() as client:
        for name, broker in cluster.brokers.items():
            for queue_id in range(QUEUES_PER_BROKER):
                response = await client.query_offset(broker.address, GROUP, TOPIC, queue_id)
                committed = -1
                if response.code == ResponseCode.SUCCESS:
                    committed = int(response.ext_fields["offset"])
                max_offset = await client.queue_offset(
                    broker.address, RequestCode.GET_MAX_OFFSET, TOPIC, queue_id
                )
                found[name, queue_id] = (committed, max_offset)
    return found


def committed_at_queue_ends(cluster: Cluster) -> dict[tuple[str, int], tuple[int, int]]:
    """The brokers' offsets once every queue's committed offset is at its end (the client
    commits with one-way requests, so they may land just after it exits)."""

    async def all_committed() -> dict[tuple[str, int], tuple[int, int]] | None:
        offsets = await queue_offsets(cluster)
        return offsets if all(c == m for c, m in offsets.values()) else None

    result: dict[tuple[str, int], tuple[int, int]] = asyncio.run(
        eventually(all_committed, what="committed offsets at the queue ends")
    )
    return result


@pytest.mark.slow
def test_ali_ons_produces_and_consumes_1000_messages_over_two_brokers(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    asyncio.run(create_topic(cluster))

    run = run_driver(ali_ons, cluster.namesrv.address, COUNT, "ali-ons message")

    check_protocol(run)
    assert sorted(s["index"] for s in run["sent"]) == list(range(COUNT))
    check_delivery(run)
    assert sum(r["compressed"] for r in run["received"]) == COUNT // 100
    per_queue = Counter((s["brokerName"], s["queueId"]) for s in run["sent"])
    assert len(per_queue) == len(BROKERS) * QUEUES_PER_BROKER, per_queue
    per_broker = Counter(s["brokerName"] for s in run["sent"])
    assert all(per_broker[name] >= COUNT // 4 for name in BROKERS), per_broker

    # The brokers hold every message, and the group's offsets ali-ons committed, per queue.
    offsets = committed_at_queue_ends(cluster)
    assert {queue: max_offset for queue, (_, max_offset) in offsets.items()} == per_queue

    # A new ali-ons process in the same group resumes from those offsets: it receives what
    # it sends now, and nothing of the first run.
    resumed = run_driver(ali_ons, cluster.namesrv.address, RESUMED_COUNT, "resumed message")

    check_protocol(resumed)
    check_delivery(resumed)
    assert len(resumed["received"]) == RESUMED_COUNT
    resumed_per_queue = Counter((s["brokerName"], s["queueId"]) for s in resumed["sent"])
    offsets = committed_at_queue_ends(cluster)
    assert {queue: m for queue, (_, m) in offsets.items()} == per_queue + resumed_per_queue
