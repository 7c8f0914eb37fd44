"""Apache RocketMQ's Java push consumer (rocketmq-client 4.9.8, unchanged) failing messages
against two reconsume brokers: each failure is sent back (CONSUMER_SEND_MSG_BACK), comes back
through ``%RETRY%<group>`` after the broker's delay level, and after ``maxReconsumeTimes``
retries lands in ``%DLQ%<group>``, which we read with our own wire client.

The Java side is ``java/src/main/java/reconsume/compat/Scenarios.java`` (scenario ``retry``):
messages with an even index fail on every delivery, odd ones on their first only.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.message.model import StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import RequestCode

from ..integration.retry_support import TEST_DELAYS_MS
from ..integration.wire_client import eventually
from .conftest import JavaClient
from .driver_support import SLACK_MS, Event, position, queue_set
from .java_client_support import CONSUMING, check_protocol, run_driver
from .servers import (
    BROKERS,
    Cluster,
    all_queues,
    committed_at_queue_ends,
    compat_cluster,
    create_topic,
    read_all,
    read_queues,
)

TOPIC = "java-retry"
GROUP = "java_retry_group"
RETRY_TOPIC = retry_topic(GROUP)
DLQ_TOPIC = dead_letter_topic(GROUP)
COUNT = 10
MAX_RECONSUME = 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with compat_cluster(tmp_path / "servers") as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


def dead_letters(cluster: Cluster, count: int) -> dict[str, list[StoredMessage]]:
    """Each broker's ``%DLQ%<group>``, once they hold ``count`` messages together."""

    async def probe() -> dict[str, list[StoredMessage]] | None:
        found = await read_all(cluster, DLQ_TOPIC)
        return found if sum(map(len, found.values())) >= count else None

    result: dict[str, list[StoredMessage]] = asyncio.run(
        eventually(probe, what=f"{count} dead letters")
    )
    return result


def test_java_consumer_retries_through_the_retry_topic_then_dead_letters(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    run = run_driver(
        java_client, cluster, "retry", tmp_path, topic=TOPIC, group=GROUP, count=COUNT,
        max_reconsume=MAX_RECONSUME, retry_queues=len(BROKERS), prefix="retried",
    )  # fmt: skip

    check_protocol(run, CONSUMING | {RequestCode.CONSUMER_SEND_MSG_BACK})

    # The consumer pulls the topic and the group's retry topic, one queue on each broker.
    assigned = {e["queues"][0]["topic"]: e["queues"] for e in run["assigned"]}
    assert queue_set(assigned[TOPIC], TOPIC) == all_queues()
    assert queue_set(assigned[RETRY_TOPIC], RETRY_TOPIC) == {(name, 0) for name in BROKERS}

    sent = sorted(run["sent"], key=lambda s: s["index"])
    assert [s["index"] for s in sent] == list(range(COUNT))
    deliveries: dict[str, list[Event]] = defaultdict(list)
    for r in run["received"]:
        deliveries[r["body"]].append(r)
    assert deliveries.keys() == {s["body"] for s in sent}

    for s in sent:
        got = deliveries[s["body"]]
        failing = s["index"] % 2 == 0
        if failing:  # delivered 1 + MAX_RECONSUME times, failing each time
            assert [r["reconsumeTimes"] for r in got] == list(range(MAX_RECONSUME + 1))
            assert {r["result"] for r in got} == {"RECONSUME_LATER"}
        else:  # failed once, consumed on its first retry
            assert [(r["reconsumeTimes"], r["result"]) for r in got] == [
                (0, "RECONSUME_LATER"),
                (1, "CONSUME_SUCCESS"),
            ]
        first, *retries = got
        assert (first["queueTopic"], *position(first), first["queueOffset"]) == (
            TOPIC, *position(s), s["queueOffset"],
        )  # fmt: skip
        for previous, retry in zip(got, retries, strict=False):
            # From the retry topic of the broker the message was sent to, under its topic and
            # message id, not before the delay of level 3 + the failed delivery's times.
            assert (retry["queueTopic"], *position(retry)) == (RETRY_TOPIC, s["brokerName"], 0)
            assert (retry["topic"], retry["msgId"], retry["body"]) == (TOPIC, s["msgId"], s["body"])
            properties = retry["properties"]
            assert (properties["RETRY_TOPIC"], properties["ORIGIN_MESSAGE_ID"]) == (
                TOPIC, s["offsetMsgId"],
            )  # fmt: skip
            assert properties["index"] == str(s["index"])
            delay_ms = TEST_DELAYS_MS[3 + previous["reconsumeTimes"] - 1]
            assert retry["receivedAt"] - previous["receivedAt"] >= delay_ms - SLACK_MS
            assert retry["storeTimestamp"] - previous["receivedAt"] >= delay_ms - SLACK_MS

    # Read with our wire client: each broker's retry queue holds each retry of the messages
    # sent to it, once; its dead-letter queue exactly the always-failing ones, once each.
    retried = read_queues(cluster, RETRY_TOPIC)
    for name in BROKERS:
        stored = Counter((m.body.decode(), m.reconsume_times) for m in retried[name])
        expected = Counter(
            (r["body"], r["reconsumeTimes"])
            for s in sent
            if s["brokerName"] == name
            for r in deliveries[s["body"]][1:]
        )
        assert stored == expected, name
    failing_sent = [s for s in sent if s["index"] % 2 == 0]
    dlq = dead_letters(cluster, len(failing_sent))
    assert sum(map(len, dlq.values())) == len(failing_sent)
    for s in failing_sent:
        (letter,) = [m for m in dlq[s["brokerName"]] if m.body.decode() == s["body"]]
        assert (letter.reconsume_times, letter.uniq_key) == (MAX_RECONSUME + 1, s["msgId"])
        assert {
            key: letter.properties[key]
            for key in ("DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "RECONSUME_DLQ_REASON")
        } == {
            "DLQ_ORIGIN_TOPIC": TOPIC,
            "DLQ_ORIGIN_MESSAGE_ID": s["msgId"],
            "RECONSUME_DLQ_REASON": "MAX_RECONSUME_TIMES",
        }
        assert letter.properties["index"] == str(s["index"])

    # The group's offsets end at the ends of the topic and of the retry topic.
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(position(s) for s in sent)
    retry_ends = committed_at_queue_ends(cluster, GROUP, RETRY_TOPIC, queues_per_broker=1)
    assert retry_ends == {(name, 0): len(retried[name]) for name in BROKERS}
