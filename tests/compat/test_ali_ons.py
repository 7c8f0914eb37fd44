"""ali-ons (the npm RocketMQ client, unchanged) produces and consumes through one reconsume name
server and two Sync-flush brokers on 127.0.0.1: sends, delayed sends, consumer restarts,
two clustering consumers sharing a group, broadcasting consumers.

The Node side is ``ali_ons/driver.js``: it prints one JSON line per event (sends, receptions,
rebalances, every request it made with the answer's code), which these tests check against what
the brokers hold, read with our own protocol-level client. Retries: ``test_ali_ons_retry.py``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.wire.codes import RequestCode

from ..integration.retry_support import TEST_DELAYS_MS
from ..integration.wire_client import BrokerClient
from .ali_ons_support import (
    TAG,
    DriverProcess,
    DriverRun,
    ali_ons_cluster,
    all_queues,
    background_consumer,
    check_protocol,
    committed_at_queue_ends,
    run_driver,
)
from .conftest import NodeProject
from .servers import BROKERS, QUEUES_PER_BROKER, Cluster, create_topic, group_offsets

COUNT = 1000
RESUMED_COUNT = 200
TOPIC = "ali-ons-compat"
GROUP = "GID_ali_ons_compat"

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
"""Requests a clustering ali-ons consumer and producer make."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with ali_ons_cluster(tmp_path) as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


def roundtrip(project: NodeProject, cluster: Cluster, count: int, **options: object) -> DriverRun:
    return run_driver(
        project,
        "roundtrip",
        namesrv=cluster.namesrv.address,
        topic=TOPIC,
        group=GROUP,
        count=count,
        tag=TAG,
        **options,
    )


def produce(project: NodeProject, cluster: Cluster, count: int, **options: object) -> DriverRun:
    run = run_driver(
        project,
        "produce",
        namesrv=cluster.namesrv.address,
        topic=TOPIC,
        group=GROUP,
        count=count,
        tag=TAG,
        **options,
    )
    assert len(run["sent"]) == count, run.explain()
    return run


def check_sent(sent: list[dict[str, Any]]) -> None:
    """Distinct messages, each SEND_OK, each at its own queue position."""
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert len({s["msgId"] for s in sent}) == len(sent)
    assert len({(s["brokerName"], s["queueId"], s["queueOffset"]) for s in sent}) == len(sent)


def check_received_as_sent(sent: list[dict[str, Any]], received: list[dict[str, Any]]) -> None:
    """Every body sent received exactly once, with tag, keys and user properties as sent, from
    the queue and offset the send reported, under the message id the send returned; bodies over
    4 KiB were compressed by the producer and arrive flagged so."""
    assert Counter(r["body"] for r in received) == Counter(s["body"] for s in sent)
    by_body = {r["body"]: r for r in received}
    for s in sent:
        r = by_body[s["body"]]
        assert (r["topic"], r["tags"], r["keys"]) == (TOPIC, TAG, f"key-{s['index']}")
        assert r["properties"]["index"] == str(s["index"])
        assert (r["reconsumeTimes"], r["fromRetryTopic"]) == (0, False)
        assert r["compressed"] == (len(s["body"]) > 4096)
        assert r["msgId"] == s["msgId"]
        placed = (r["brokerName"], r["queueId"], r["queueOffset"])
        assert placed == (s["brokerName"], s["queueId"], s["queueOffset"])


def per_queue(sent: list[dict[str, Any]]) -> Counter[tuple[str, int]]:
    return Counter((s["brokerName"], s["queueId"]) for s in sent)


@pytest.mark.slow
def test_ali_ons_produces_and_consumes_1000_messages_over_two_brokers(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    run = roundtrip(ali_ons, cluster, COUNT, prefix="ali-ons message")

    check_protocol(run, EXERCISED)
    assert sorted(s["index"] for s in run["sent"]) == list(range(COUNT))
    check_sent(run["sent"])
    check_received_as_sent(run["sent"], run["received"])
    assert sum(r["compressed"] for r in run["received"]) == COUNT // 100
    sent_per_queue = per_queue(run["sent"])
    assert len(sent_per_queue) == len(BROKERS) * QUEUES_PER_BROKER, sent_per_queue
    per_broker = Counter(s["brokerName"] for s in run["sent"])
    assert all(per_broker[name] >= COUNT // 4 for name in BROKERS), per_broker

    # The brokers hold every message, and the group's offsets ali-ons committed, per queue.
    offsets = committed_at_queue_ends(cluster, GROUP, TOPIC)
    assert {queue: max_offset for queue, (_, max_offset) in offsets.items()} == sent_per_queue

    # A new ali-ons process in the same group resumes from those offsets: it receives what
    # it sends now, and nothing of the first run.
    resumed = roundtrip(ali_ons, cluster, RESUMED_COUNT, prefix="resumed message")

    check_protocol(resumed, EXERCISED)
    check_sent(resumed["sent"])
    check_received_as_sent(resumed["sent"], resumed["received"])
    assert len(resumed["received"]) == RESUMED_COUNT
    offsets = committed_at_queue_ends(cluster, GROUP, TOPIC)
    total = sent_per_queue + per_queue(resumed["sent"])
    assert {queue: m for queue, (_, m) in offsets.items()} == total


DELAY_CYCLE = ("0", "1", "3", "5", "10", "20", "T+60000")
"""Per message, round robin: no delay, levels 1, 3, 5, 10 (100 ms to 1 s with the test
brokers' levels), level 20 (past the last: the last, 1.8 s), and ali-ons' ONS-only
``setStartDeliverTime`` one minute ahead."""
DELAYED_COUNT = 5 * len(DELAY_CYCLE)


def level_delay_ms(level: int) -> int:
    """The broker's delay of ``level``: a level past the last is the last."""
    return TEST_DELAYS_MS[min(level, len(TEST_DELAYS_MS)) - 1]


async def schedule_depths(cluster: Cluster) -> dict[tuple[str, int], int]:
    """(broker, level) → messages the broker's schedule queue of that level ever held."""
    depths = {}
    async with BrokerClient() as client:
        for name, broker in cluster.brokers.items():
            for level in range(1, len(TEST_DELAYS_MS) + 1):
                depths[name, level] = await client.queue_offset(
                    broker.address, RequestCode.GET_MAX_OFFSET, SCHEDULE_TOPIC, level - 1
                )
    return depths


@pytest.mark.slow
def test_ali_ons_delay_levels_hold_messages_for_their_delay(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    run = roundtrip(
        ali_ons,
        cluster,
        DELAYED_COUNT,
        prefix="delayed message",
        concurrency=1,
        **{"delay-cycle": ",".join(DELAY_CYCLE)},
    )

    check_protocol(run, EXERCISED)
    sent, received = run["sent"], run["received"]
    check_sent([s for s in sent if s["delayLevel"] == 0])
    assert len({s["msgId"] for s in sent}) == len(sent)
    assert Counter(r["body"] for r in received) == Counter(s["body"] for s in sent)
    by_body = {r["body"]: r for r in received}
    delayed = [s for s in sent if s["delayLevel"] > 0]
    assert len(delayed) == 5 * 5
    for s in sent:
        r = by_body[s["body"]]
        assert (r["topic"], r["tags"], r["keys"]) == (TOPIC, TAG, f"key-{s['index']}")
        assert (r["reconsumeTimes"], r["fromRetryTopic"]) == (0, False)
        assert (r["brokerName"], r["queueId"]) == (s["brokerName"], s["queueId"])
        if s["delayLevel"] == 0:
            # Not delayed, the ONS start-deliver time among them (an open-source broker keeps
            # it as a plain property): consumed as stored by the send.
            assert (r["msgId"], r["queueOffset"]) == (s["msgId"], s["queueOffset"])
            assert "DELAY" not in r["properties"]
            continue
        delay = level_delay_ms(s["delayLevel"])
        # Never before its delay: neither the delivery into the topic (the delivered copy's
        # store time) nor the arrival, counted from before the send.
        assert r["storeTimestamp"] - r["bornTimestamp"] >= delay, (s, r)
        assert r["at"] - s["sentAt"] >= delay, (s, r)
        # A new record in the topic, which says where it was meant for.
        assert r["msgId"] != s["msgId"]
        assert "DELAY" not in r["properties"]
        assert r["properties"]["REAL_TOPIC"] == TOPIC
        assert r["properties"]["REAL_QID"] == str(s["queueId"])
    starting = [s for s in sent if s["startDeliverTime"] is not None]
    assert len(starting) == 5
    for s in starting:
        r = by_body[s["body"]]
        assert r["properties"]["__STARTDELIVERTIME"] == str(s["startDeliverTime"])
        assert r["at"] < s["startDeliverTime"]

    # One level's messages are delivered in the order they were stored (sent one at a time):
    # their copies follow each other in the broker's commit log.
    for name in BROKERS:
        for level in {s["delayLevel"] for s in delayed}:
            positions = [
                by_body[s["body"]]["commitLogOffset"]
                for s in delayed
                if (s["brokerName"], s["delayLevel"]) == (name, level)
            ]
            assert positions == sorted(set(positions)), (name, level, positions)

    # Each went through its broker's schedule queue of its level (the last for level 20); as
    # in RocketMQ, the send's answer has the queue it was sent to and its offset in that
    # schedule queue.
    for name in BROKERS:
        for level in range(1, len(TEST_DELAYS_MS) + 1):
            offsets = [
                s["queueOffset"]
                for s in delayed
                if s["brokerName"] == name and min(s["delayLevel"], len(TEST_DELAYS_MS)) == level
            ]
            assert offsets == list(range(len(offsets))), (name, level)
    depths = asyncio.run(schedule_depths(cluster))
    expected = Counter(
        (s["brokerName"], min(s["delayLevel"], len(TEST_DELAYS_MS))) for s in delayed
    )
    assert {key: depth for key, depth in depths.items() if depth} == expected
    committed_at_queue_ends(cluster, GROUP, TOPIC)


def received_bodies(process: DriverProcess, prefix: str) -> Counter[str]:
    return Counter(r["body"] for r in process["received"] if r["body"].startswith(prefix))


def sent_bodies(run: DriverRun) -> set[str]:
    return {s["body"] for s in run["sent"]}


def split_evenly(first: DriverProcess, second: DriverProcess) -> bool:
    """Both consumers pull four queues of the topic, and together all eight."""
    mine, theirs = first.assigned(TOPIC) or [], second.assigned(TOPIC) or []
    return len(mine) == len(theirs) == QUEUES_PER_BROKER and sorted(mine + theirs) == all_queues()


def sent_to(run: DriverRun, queues: list[str]) -> Counter[str]:
    """The bodies ``run`` sent to ``queues`` ("brokerName/queueId"), once each."""
    return Counter(s["body"] for s in run["sent"] if f"{s['brokerName']}/{s['queueId']}" in queues)


@pytest.mark.slow
def test_ali_ons_clustering_consumers_share_a_group(ali_ons: NodeProject, cluster: Cluster) -> None:
    options = {"namesrv": cluster.namesrv.address, "topic": TOPIC, "group": GROUP, "tag": TAG}
    with background_consumer(ali_ons, instance="first", **options) as first:
        # Alone, the first consumer pulls every queue and consumes everything.
        first.wait_for(lambda: first.assigned(TOPIC) == all_queues(), "first owns every queue")
        before = produce(ali_ons, cluster, 200, prefix="before")
        check_sent(before["sent"])
        first.wait_for(
            lambda: set(received_bodies(first, "before")) == sent_bodies(before),
            "first received every message",
        )
        committed_at_queue_ends(cluster, GROUP, TOPIC)

        # A second consumer joins: both rebalance to four queues each, and each consumes
        # exactly what is sent to its queues.
        with background_consumer(ali_ons, instance="second", **options) as second:
            second.wait_for(lambda: split_evenly(first, second), "four queues each")
            after = produce(ali_ons, cluster, 400, prefix="after")
            check_sent(after["sent"])
            second.wait_for(
                lambda: (
                    set(received_bodies(first, "after") + received_bodies(second, "after"))
                    == sent_bodies(after)
                ),
                "every message received",
            )
            committed_at_queue_ends(cluster, GROUP, TOPIC)
            second_run = second.close()
        first_run = first.close()

    for run in (first_run, second_run):
        check_protocol(run, EXERCISED - {RequestCode.SEND_MESSAGE_V2})
        assert run["ready"][0]["messageModel"] == "CLUSTERING"
        assert all(r["reconsumeTimes"] == 0 for r in run["received"])
    # Before the second joined: the first received everything, once.
    assert received_bodies(first, "before") == Counter(sent_bodies(before))
    assert not received_bodies(second, "before")
    # After: each message once, by the consumer pulling its queue; both had a share.
    first_queues, second_queues = first.assigned(TOPIC), second.assigned(TOPIC)
    assert first_queues is not None
    assert second_queues is not None
    assert received_bodies(first, "after") == sent_to(after, first_queues)
    assert received_bodies(second, "after") == sent_to(after, second_queues)
    assert received_bodies(first, "after")
    assert received_bodies(second, "after")
    check_received_as_sent(
        before["sent"] + after["sent"], first_run["received"] + second_run["received"]
    )


BROADCAST_GROUP = "GID_ali_ons_broadcast"


def owns_every_queue(process: DriverProcess) -> bool:
    return process.assigned(TOPIC) == all_queues()


def received_all(process: DriverProcess, run: DriverRun) -> bool:
    return set(received_bodies(process, "broadcast")) == sent_bodies(run)


@pytest.mark.slow
def test_ali_ons_broadcasting_consumers_each_get_every_message(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    options = {
        "namesrv": cluster.namesrv.address,
        "topic": TOPIC,
        "group": BROADCAST_GROUP,
        "tag": TAG,
        "broadcast": "true",
    }
    with (
        background_consumer(ali_ons, instance="first", **options) as first,
        background_consumer(ali_ons, instance="second", **options) as second,
    ):
        for process in (first, second):
            process.wait_for(partial(owns_every_queue, process), "every queue")
        # Every tenth message fails its listener: a broadcasting consumer drops it.
        sent = produce(
            ali_ons, cluster, 100, prefix="broadcast", **{"fail-cycle": "always" + ",0" * 9}
        )
        check_sent(sent["sent"])
        for process in (first, second):
            process.wait_for(partial(received_all, process, sent), "every message received")
        runs = [first.close(), second.close()]

    for run in runs:
        check_protocol(
            run,
            {
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                RequestCode.HEART_BEAT,
                RequestCode.PULL_MESSAGE,
                RequestCode.UNREGISTER_CLIENT,
            },
        )
        assert run["ready"][0]["messageModel"] == "BROADCASTING"
        check_received_as_sent(sent["sent"], run["received"])
        assert Counter(r["verdict"] for r in run["received"]) == {"throw": 10, "consume": 90}
        # No retries, and no offsets on the brokers (kept in the consumer's memory).
        codes = {e["code"] for e in run["rpc"]}
        assert RequestCode.CONSUMER_SEND_MSG_BACK not in codes
        assert RequestCode.UPDATE_CONSUMER_OFFSET not in codes
        assert not [e for e in run["rpc"] if str(e.get("topic")).startswith("%RETRY%")]
    # What a broker answers for a group that never committed, on queues starting at 0.
    offsets = asyncio.run(group_offsets(cluster, BROADCAST_GROUP, TOPIC))
    assert {committed for committed, _ in offsets.values()} == {0}
    assert sum(max_offset for _, max_offset in offsets.values()) == 100
