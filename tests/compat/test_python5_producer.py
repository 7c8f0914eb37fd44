"""Apache RocketMQ's Python client 5.x (``rocketmq-python-client``, gRPC, unchanged) sends to
brokers serving ``--grpc-listen``: normal, FIFO and delayed messages, each stored where a 4.x
consumer finds it — the client's message id as ``UNIQ_KEY``, tag, keys, user properties, a
FIFO message's group as ``__SHARDINGKEY`` in the queue the client chose for the group, a
delayed one in its topic only once its delivery time has come (the timer engine)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.message import properties as props

from ..integration.cluster import start_broker
from ..integration.processes import start_server
from ..polling import eventually
from .servers import BROKERS, QUEUES_PER_BROKER, Cluster, create_topic, read_all, stop_cleanly

TOPIC = "v5-produce"
SENDER = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints, topic = sys.argv[1], sys.argv[2]
producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
producer.startup()
try:
    for i in range(12):
        message = Message()
        message.topic = topic
        message.body = f"v5 {i}".encode()
        message.tag = "tagA"
        message.keys = f"key-{i}"
        message.add_property("index", str(i))
        kind = ("normal", "fifo", "delay")[i % 3]
        if kind == "fifo":
            message.message_group = f"group-{i % 2}"
        due = None
        if kind == "delay":
            # The client puts this value in the protocol's seconds field.
            due = int(time.time()) + 2
            message.delivery_timestamp = due
        receipt = producer.send(message)
        print(json.dumps({"kind": kind, "index": i, "id": receipt.message_id, "due": due}),
              flush=True)
finally:
    producer.shutdown()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, list[str]]]:
    """Two brokers with gRPC services, and their gRPC addresses."""
    root = tmp_path_factory.mktemp("v5")
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    started = Cluster(namesrv)
    try:
        for name in BROKERS:
            started.brokers[name] = start_broker(
                namesrv.address, name, root / name, cluster="v5",
                extra=("--grpc-listen", "127.0.0.1:0"),
            )  # fmt: skip
        grpc = []
        for broker in started.brokers.values():
            match = re.search(r"serving gRPC on (\S+)", "".join(broker.output))
            assert match is not None, "".join(broker.output)
            grpc.append(match.group(1))
        asyncio.run(create_topic(started, TOPIC))
        yield started, grpc
    finally:
        stop_cleanly(started.brokers, namesrv)


def _stored(cluster: Cluster) -> dict[str, tuple[str, int, dict[str, str]]]:
    """Message id → (broker, queue id, properties) of every message of the topic."""
    found = {}
    for queue_id in range(QUEUES_PER_BROKER):
        for broker, messages in asyncio.run(read_all(cluster, TOPIC, queue_id)).items():
            for message in messages:
                properties = dict(message.properties)
                found[properties[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]] = (
                    broker, queue_id, properties,
                )  # fmt: skip
    return found


def test_the_python_5x_client_sends_normal_fifo_and_delayed_messages(
    cluster: tuple[Cluster, list[str]], tmp_path: Path
) -> None:
    servers, grpc = cluster
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", SENDER, grpc[0], TOPIC],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sent = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(sent) == 12
    assert len({s["id"] for s in sent}) == 12
    delayed = {s["id"]: s["due"] for s in sent if s["kind"] == "delay"}

    ids = {s["id"] for s in sent}

    def all_stored() -> dict[str, tuple[str, int, dict[str, str]]] | None:
        found = _stored(servers)
        return found if set(found) >= ids else None

    stored = eventually(all_stored, what="every message the 5.x client sent in the topic")
    seen_at = time.time()
    for s in sent:
        properties = stored[s["id"]][2]
        assert properties[props.TAGS] == "tagA"
        assert properties[props.KEYS] == f"key-{s['index']}"
        assert properties["index"] == str(s["index"])
        if s["kind"] == "fifo":
            assert properties[props.SHARDING_KEY] == f"group-{s['index'] % 2}"
    # A message group's messages all went to one queue.
    for group in ("group-0", "group-1"):
        queues = {
            stored[s["id"]][:2]
            for s in sent
            if s["kind"] == "fifo" and stored[s["id"]][2][props.SHARDING_KEY] == group
        }
        assert len(queues) == 1, queues
    # Delayed messages reached their topic through the timer, not before they were due.
    assert all(seen_at >= due - 0.5 for due in delayed.values()), (started, seen_at, delayed)
    for message_id in delayed:
        assert props.TIMER_DELIVER_MS in stored[message_id][2] or (
            props.REAL_TOPIC in stored[message_id][2]
        ), stored[message_id][2]
    # Both brokers served the route: the client spread its normal messages over them.
    assert {stored[s["id"]][0] for s in sent} <= set(BROKERS)
