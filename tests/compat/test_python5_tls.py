"""Apache RocketMQ's Python client 5.x over TLS (``tls_enable=True``) against brokers whose
ports are TLS-only (``--tls-mode enforcing``): the gRPC port speaks TLS with the broker's own
certificate, which the client verifies against the test CA (grpc's
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``); a plaintext client gets nothing through."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.wire.tls import TLS_CA_FILE_ENV, TLS_ENV

from ..tls_certs import CertAuthority, make_ca
from .servers import Cluster, create_topic
from .test_java_client_tls import tls_cluster

TOPIC = "v5-tls"
CLIENT = r"""
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer

endpoints, topic, tls = sys.argv[1], sys.argv[2], sys.argv[3] == "tls"
config = ClientConfiguration(endpoints, Credentials(), request_timeout=5)
producer = Producer(config, (topic,), tls_enable=tls)
try:
    producer.startup()
    message = Message()
    message.topic = topic
    message.body = b"over tls"
    print(json.dumps({"sent": producer.send(message).message_id}), flush=True)
except Exception as exc:
    print(json.dumps({"failed": str(exc)}), flush=True)
    sys.exit(0)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, "v5_tls_group", {topic: FilterExpression("*")},
                          await_duration=2, tls_enable=tls)
consumer.startup()
try:
    for _ in range(10):
        for m in consumer.receive(16, 10):
            consumer.ack(m)
            print(json.dumps({"acked": m.message_id}), flush=True)
            sys.exit(0)
finally:
    consumer.shutdown()
"""


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return make_ca(tmp_path_factory.mktemp("ca5"))


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, ca: CertAuthority
) -> Iterator[tuple[Cluster, str]]:
    saved = {name: os.environ.get(name) for name in (TLS_ENV, TLS_CA_FILE_ENV)}
    os.environ[TLS_ENV], os.environ[TLS_CA_FILE_ENV] = "true", str(ca.ca_file)
    try:
        root = tmp_path_factory.mktemp("tls5")
        with tls_cluster(root, ca, ("--grpc-listen", "127.0.0.1:0")) as started:
            asyncio.run(create_topic(started, TOPIC))
            first = next(iter(started.brokers.values()))
            match = re.search(r"serving gRPC on (\S+)", "".join(first.output))
            assert match is not None
            yield started, match.group(1)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(endpoint: str, mode: str, ca: CertAuthority) -> list[dict[str, str]]:
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca.ca_file)}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, endpoint, TOPIC, mode],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_5x_client_sends_and_receives_over_tls(
    cluster: tuple[Cluster, str], ca: CertAuthority
) -> None:
    _servers, endpoint = cluster
    events = _run(endpoint, "tls", ca)
    sent = [e["sent"] for e in events if "sent" in e]
    assert len(sent) == 1, events
    assert [e["acked"] for e in events if "acked" in e] == sent


def test_a_plaintext_5x_client_gets_nothing_through(
    cluster: tuple[Cluster, str], ca: CertAuthority, tmp_path: Path
) -> None:
    _servers, endpoint = cluster
    events = _run(endpoint, "plain", ca)
    assert [e for e in events if "failed" in e], events
    assert not [e for e in events if "sent" in e]
