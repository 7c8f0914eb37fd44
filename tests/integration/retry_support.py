"""Helpers of the retry and schedule tests: brokers with millisecond delay levels and an HTTP
port, /metrics scrapes, and reading a whole queue with plain pulls."""

from __future__ import annotations

import asyncio
import http.client
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from reconsume.engine.delays import parse_delay_levels
from reconsume.message.model import StoredMessage
from reconsume.wire.codes import ResponseCode

from .cluster import SMALL_SEGMENTS, Cluster, start_cluster
from .processes import ServerProcess
from .wire_client import BrokerClient, records

TEST_DELAY_LEVELS = (
    "100ms 200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s "
    "1100ms 1200ms 1300ms 1400ms 1500ms 1600ms 1700ms 1800ms"
)
"""RocketMQ's 18 levels, in tenths of a second instead of seconds to hours."""
TEST_DELAYS_MS = parse_delay_levels(TEST_DELAY_LEVELS)
TIMESTAMP_SLACK_S = 0.002
"""Store timestamps are whole milliseconds: a due time can be up to 1 ms before the exact
store time + delay."""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
_HTTP_LINE = re.compile(r"serving HTTP on (\S+)")


def retry_flags(delay_levels: str = TEST_DELAY_LEVELS, *more: str) -> list[str]:
    return ["--delay-levels", delay_levels, "--http-listen", "127.0.0.1:0", *more]


@contextmanager
def retry_cluster(
    root: Path,
    brokers: Sequence[str] = ("broker-a", "broker-b"),
    *,
    extra: Sequence[str] = (),
    delay_levels: str = TEST_DELAY_LEVELS,
    config: str = SMALL_SEGMENTS,
) -> Iterator[Cluster]:
    """A name server and Sync-flush brokers with millisecond delay levels and /metrics."""
    cluster = start_cluster(root, brokers, extra=retry_flags(delay_levels, *extra), config=config)
    try:
        yield cluster
    finally:
        cluster.kill()


def http_address(server: ServerProcess) -> str:
    for line in server.output:
        match = _HTTP_LINE.search(line)
        if match:
            return match.group(1)
    raise AssertionError(f"no HTTP address announced: {''.join(server.output)}")


def scrape_now(server: ServerProcess) -> Samples:
    host, _, port = http_address(server).rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        body = response.read().decode()
        assert response.status == 200, body
    finally:
        connection.close()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


async def scrape(server: ServerProcess) -> Samples:
    return await asyncio.to_thread(scrape_now, server)


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def total(servers: Sequence[ServerProcess], name: str, **labels: str) -> float:
    """``name{labels}`` summed over brokers."""
    return sum([metric(await scrape(server), name, **labels) for server in servers])


async def read_queue(
    client: BrokerClient, addr: str, topic: str, queue_id: int = 0, group: str = "test-reader"
) -> list[StoredMessage]:
    """Every message of (topic, queue) on ``addr`` (no commit, no long polling)."""
    messages: list[StoredMessage] = []
    offset = 0
    while True:
        response = await client.pull(addr, group, topic, queue_id, offset, max_nums=32)
        if response.code != ResponseCode.SUCCESS:
            assert response.code in (
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_OFFSET_MOVED,
                ResponseCode.TOPIC_NOT_EXIST,
            ), (response.code, response.remark)
            return messages
        batch = records(response)
        messages.extend(batch)
        offset = int(response.ext_fields["nextBeginOffset"])
