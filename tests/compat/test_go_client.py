"""Apache RocketMQ's Go client (rocketmq-client-go/v2, unchanged) against one reconsume name
server and two brokers: sync sends with tags, keys and properties received by a push consumer,
and a push consumer's failures retried through ``%RETRY%<group>`` until they are dead letters.

The Go side is ``go/scenarios.go``: each scenario prints what it sent and received; the tests
check that against what the brokers hold, read with our own wire client.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.message.model import StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.message.sysflag import COMPRESSED

from ..integration.retry_support import TEST_DELAYS_MS
from ..integration.wire_client import eventually
from .conftest import GoClient
from .driver_support import SLACK_MS, TAG, Event, once_each, position, queue_set
from .go_client_support import create_retry_topic, run_driver
from .servers import (
    BROKERS,
    FAMILIES,
    Cluster,
    all_queues,
    committed_at_queue_ends,
    compat_cluster,
    create_topic,
    family_cluster,
    read_all,
)

TOPIC = "go-compat"
GROUP = "go_compat_consumer"
RETRY_GROUP = "go_retry_group"
COUNT = 40
LARGE_EVERY = 10


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with compat_cluster(tmp_path / "servers") as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


@pytest.fixture(params=FAMILIES)
def either_family(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """:func:`cluster`, or one reached over IPv6 (as pods of an IPv6 cluster)."""
    with family_cluster(tmp_path / "servers", request.param, TOPIC) as started:
        yield started


def test_go_client_sends_and_consumes(
    go_client: GoClient, either_family: Cluster, tmp_path: Path
) -> None:
    cluster = either_family
    run = run_driver(
        go_client, cluster, "send", tmp_path, topic=TOPIC, group=GROUP, prefix="sent",
        count=COUNT, large_every=LARGE_EVERY,
    )  # fmt: skip

    (assigned,) = run["assigned"]
    assert queue_set(assigned["queues"], TOPIC) == all_queues()

    # Round robin over all 8 queues; each message arrives once, as sent, where the send said,
    # stored by the broker it names; bodies over 4 KiB compressed by the producer.
    sent = run["sent"]
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert sorted(s["index"] for s in sent) == list(range(COUNT))
    assert len({s["msgId"] for s in sent}) == COUNT
    assert len({(*position(s), s["queueOffset"]) for s in sent}) == COUNT
    assert {position(s) for s in sent} == all_queues()
    received = once_each(run["received"])
    assert set(received) == {s["body"] for s in sent}
    for s in sent:
        assert cluster.broker_of_msg_id(s["offsetMsgId"]) == s["brokerName"]
        r = received[s["body"]]
        assert (r["topic"], r["queueTopic"], r["tags"], r["keys"]) == (
            TOPIC, TOPIC, TAG, f"key-{s['index']}",
        )  # fmt: skip
        assert (r["properties"]["index"], r["reconsumeTimes"]) == (str(s["index"]), 0)
        assert r["sysFlag"] & COMPRESSED == (COMPRESSED if len(s["body"]) > 4096 else 0)
        assert (r["msgId"], r["offsetMsgId"]) == (s["msgId"], s["offsetMsgId"])
        assert (*position(r), r["queueOffset"]) == (*position(s), s["queueOffset"])
    assert sum(len(s["body"]) > 4096 for s in sent) == COUNT // LARGE_EVERY

    # Shutting down, the consumer committed its offsets at the queue ends.
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(position(s) for s in sent)


RETRY_COUNT = 6
MAX_RECONSUME = 2


def test_go_consumer_retries_through_the_retry_topic_then_dead_letters(
    go_client: GoClient, cluster: Cluster, tmp_path: Path
) -> None:
    """Messages with an even index fail on every delivery, odd ones on their first only; the
    consumer's ``WithMaxReconsumeTimes(2)`` rides on each send-back (CONSUMER_SEND_MSG_BACK's
    ``maxReconsumeTimes``), so an always-failing message is delivered 3 times, then the broker
    stores it in ``%DLQ%<group>`` with reconsume times 3."""
    asyncio.run(create_retry_topic(cluster, RETRY_GROUP))
    run = run_driver(
        go_client, cluster, "retry", tmp_path, topic=TOPIC, group=RETRY_GROUP,
        count=RETRY_COUNT, max_reconsume=MAX_RECONSUME, retry_queues=len(BROKERS),
        prefix="retried",
    )  # fmt: skip

    retry = retry_topic(RETRY_GROUP)
    assigned = {e["queues"][0]["topic"]: e["queues"] for e in run["assigned"]}
    assert queue_set(assigned[retry], retry) == {(name, 0) for name in BROKERS}

    sent = sorted(run["sent"], key=lambda s: s["index"])
    assert [s["index"] for s in sent] == list(range(RETRY_COUNT))
    deliveries: dict[str, list[Event]] = defaultdict(list)
    for r in run["received"]:
        deliveries[r["body"]].append(r)
    assert deliveries.keys() == {s["body"] for s in sent}
    for s in sent:
        got = deliveries[s["body"]]
        if s["index"] % 2 == 0:  # delivered 1 + MAX_RECONSUME times, failing each time
            assert [(r["reconsumeTimes"], r["result"]) for r in got] == [
                (n, "RECONSUME_LATER") for n in range(MAX_RECONSUME + 1)
            ]
        else:  # failed once, consumed on its first retry
            assert [(r["reconsumeTimes"], r["result"]) for r in got] == [
                (0, "RECONSUME_LATER"),
                (1, "CONSUME_SUCCESS"),
            ]
        first, *retries = got
        assert (first["queueTopic"], *position(first)) == (TOPIC, *position(s))
        for previous, again in zip(got, retries, strict=False):
            # From the retry topic of the broker the message was sent to, under its own topic
            # and message id, not before the delay of level 3 + the failed delivery's times.
            assert (again["queueTopic"], *position(again)) == (retry, s["brokerName"], 0)
            assert (again["topic"], again["msgId"]) == (TOPIC, s["msgId"])
            assert again["properties"]["RETRY_TOPIC"] == TOPIC
            delay_ms = TEST_DELAYS_MS[3 + previous["reconsumeTimes"] - 1]
            assert again["receivedAt"] - previous["receivedAt"] >= delay_ms - SLACK_MS

    # Each always-failing message is in its broker's dead-letter queue, once, with the
    # reconsume times the consumer's maximum gives.
    failing = [s for s in sent if s["index"] % 2 == 0]

    async def dead_letters() -> dict[str, list[StoredMessage]] | None:
        found = await read_all(cluster, dead_letter_topic(RETRY_GROUP))
        return found if sum(map(len, found.values())) >= len(failing) else None

    letters = asyncio.run(eventually(dead_letters, what=f"{len(failing)} dead letters"))
    stored = Counter(
        (name, m.body.decode(), m.reconsume_times, m.uniq_key, m.properties["DLQ_ORIGIN_TOPIC"])
        for name, messages in letters.items()
        for m in messages
    )
    assert stored == Counter(
        (s["brokerName"], s["body"], MAX_RECONSUME + 1, s["msgId"], TOPIC) for s in failing
    )
