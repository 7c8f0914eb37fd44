"""Apache RocketMQ's Java client (rocketmq-client 4.9.8, unchanged) against one reconsume name
server and two brokers: route discovery, sync, batch and delay-level sends, and a group's
offsets across a consumer restart.

The Java side is ``java/src/main/java/reconsume/compat/Scenarios.java``: each scenario prints
what it sent and received; the tests check that against what the brokers hold, read with our own
wire client.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.message.sysflag import COMPRESSED
from reconsume.wire.codes import RequestCode

from ..integration.retry_support import TEST_DELAYS_MS
from .conftest import JavaClient
from .driver_support import SLACK_MS, TAG, once_each, position, queue_set
from .java_client_support import CONSUMING, check_protocol, run_driver
from .servers import (
    BROKERS,
    CLUSTER_NAME,
    FAMILIES,
    QUEUES_PER_BROKER,
    Cluster,
    all_queues,
    committed_at_queue_ends,
    compat_cluster,
    create_topic,
    family_cluster,
    topic_route,
    view_records,
)

TOPIC = "java-compat"
AUTO_TOPIC = "java-compat-created-on-send"
GROUP = "java_compat_consumer"


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


def test_java_client_discovers_the_topic_on_both_brokers(
    java_client: JavaClient, either_family: Cluster, tmp_path: Path
) -> None:
    cluster = either_family
    run = run_driver(
        java_client, cluster, "route", tmp_path, topic=TOPIC, group=GROUP, auto_topic=AUTO_TOPIC
    )
    check_protocol(run, CONSUMING, created=[AUTO_TOPIC])

    # The route as the client decoded it from the name server's answer.
    (route,) = run["route"]
    assert sorted(route["queueDatas"], key=lambda q: q["brokerName"]) == [
        {"brokerName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for name in BROKERS
    ]
    assert sorted(route["brokerDatas"], key=lambda b: b["brokerName"]) == [
        {
            "brokerName": name,
            "cluster": CLUSTER_NAME,
            "brokerAddrs": {"0": cluster.brokers[name].address},
        }
        for name in BROKERS
    ]
    assert queue_set(run["publishQueues"][0]["queues"], TOPIC) == all_queues()
    assert queue_set(run["subscribeQueues"][0]["queues"], TOPIC) == all_queues()
    (assigned,) = run["assigned"]
    assert queue_set(assigned["queues"], TOPIC) == all_queues()

    # One message sent explicitly to each queue is stored there and pulled from there.
    sent = [s for s in run["sent"] if s["kind"] == "explicit"]
    assert len(sent) == len(all_queues())
    received = once_each(run["received"])
    assert set(received) == {s["body"] for s in sent}
    for s in sent:
        target = (s["target"]["brokerName"], s["target"]["queueId"])
        assert (s["status"], position(s), s["queueOffset"]) == ("SEND_OK", target, 0)
        assert cluster.broker_of_msg_id(s["offsetMsgId"]) == s["brokerName"]
        r = received[s["body"]]
        assert (position(r), r["queueOffset"], r["topic"], r["tags"]) == (target, 0, TOPIC, TAG)
        assert (r["msgId"], r["offsetMsgId"]) == (s["msgId"], s["offsetMsgId"])

    # A send to a topic no broker has goes by the default topic's route; the broker that took
    # it created the topic (the producer's 4 queues) and the name server routes it there.
    (auto,) = [s for s in run["sent"] if s["kind"] == "auto"]
    assert (auto["status"], auto["topic"]) == ("SEND_OK", AUTO_TOPIC)
    route = asyncio.run(topic_route(cluster, AUTO_TOPIC))
    assert route["queueDatas"] == [
        {
            "brokerName": auto["brokerName"],
            "readQueueNums": 4,
            "writeQueueNums": 4,
            "perm": 6,
            "topicSysFlag": 0,
        }
    ]


COUNT = 100
LARGE_EVERY = 25
BATCHES = 4
BATCH_SIZE = 10
LEVELS = (1, 3, 5, 10)
PER_LEVEL = 2


def test_java_client_sync_batch_and_delayed_sends(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    run = run_driver(
        java_client, cluster, "send", tmp_path, topic=TOPIC, group=GROUP, prefix="sent",
        count=COUNT, large_every=LARGE_EVERY, batches=BATCHES, batch_size=BATCH_SIZE,
        delay_levels=",".join(map(str, LEVELS)), per_level=PER_LEVEL,
    )  # fmt: skip

    check_protocol(run, CONSUMING | {RequestCode.SEND_BATCH_MESSAGE})
    sent, batches = run["sent"], run["sentBatch"]
    assert {s["status"] for s in [*sent, *batches]} == {"SEND_OK"}
    received = once_each(run["received"])
    expected = {s["body"] for s in sent} | {body for b in batches for body in b["bodies"]}
    assert set(received) == expected
    assert len(received) == COUNT + BATCHES * BATCH_SIZE + len(LEVELS) * PER_LEVEL

    # Sync sends: round robin over all 8 queues; each arrives as sent, where the send said;
    # bodies over 4 KiB compressed by the producer (and flagged so).
    sync = [s for s in sent if s["kind"] == "sync"]
    assert sorted(s["index"] for s in sync) == list(range(COUNT))
    assert len({s["msgId"] for s in sync}) == COUNT
    assert len({(*position(s), s["queueOffset"]) for s in sync}) == COUNT
    assert {position(s) for s in sync} == all_queues()
    for s in sync:
        r = received[s["body"]]
        assert (r["topic"], r["queueTopic"], r["tags"], r["keys"]) == (
            TOPIC, TOPIC, TAG, f"key-{s['index']}",
        )  # fmt: skip
        assert r["properties"]["index"] == str(s["index"])
        assert r["reconsumeTimes"] == 0
        assert r["sysFlag"] & COMPRESSED == (COMPRESSED if len(s["body"]) > 4096 else 0)
        assert (r["msgId"], r["offsetMsgId"]) == (s["msgId"], s["offsetMsgId"])
        assert (*position(r), r["queueOffset"]) == (*position(s), s["queueOffset"])
    assert sum(len(s["body"]) > 4096 for s in sync) == COUNT // LARGE_EVERY

    # Batch sends (SEND_BATCH_MESSAGE): one queue per batch, consecutive offsets in batch
    # order; the result lists each message's id and offset id.
    assert len(batches) == BATCHES
    for b in batches:
        ids, offset_ids = b["msgId"].split(","), b["offsetMsgId"].split(",")
        assert len(ids) == len(offset_ids) == len(b["bodies"]) == BATCH_SIZE
        for j, body in enumerate(b["bodies"]):
            r = received[body]
            assert (r["msgId"], r["offsetMsgId"]) == (ids[j], offset_ids[j])
            assert (*position(r), r["queueOffset"]) == (*position(b), b["queueOffset"] + j)
            assert (r["tags"], r["keys"], r["properties"]["index"]) == (
                TAG, body.replace("sent batch ", "batch-key-"), str(j),
            )  # fmt: skip
            assert cluster.broker_of_msg_id(offset_ids[j]) == b["brokerName"]

    # Delayed sends: none arrives before its level's delay (counted from before the send, and
    # from its born time to when it was stored in the topic), in the queue the send named,
    # without DELAY and with REAL_TOPIC / REAL_QID, under the same message id.
    delayed = [s for s in sent if s["kind"] == "delay"]
    assert sorted(s["delayLevel"] for s in delayed) == sorted(LEVELS * PER_LEVEL)
    for s in delayed:
        r = received[s["body"]]
        delay_ms = TEST_DELAYS_MS[s["delayLevel"] - 1]
        assert r["receivedAt"] - s["sentAt"] >= delay_ms - SLACK_MS, (s, r)
        assert r["storeTimestamp"] - r["bornTimestamp"] >= delay_ms - SLACK_MS, (s, r)
        assert position(r) == position(s)
        assert (r["msgId"], r["reconsumeTimes"], r["topic"]) == (s["msgId"], 0, TOPIC)
        assert "DELAY" not in r["properties"]
        assert (r["properties"]["REAL_TOPIC"], r["properties"]["REAL_QID"]) == (
            TOPIC, str(s["queueId"]),
        )  # fmt: skip

    # What the brokers hold, read with our wire client: every queue ends after what was
    # received from it, and the group's committed offsets are there; each delayed message came
    # from a record in its level's schedule queue on the broker it was sent to.
    per_queue = Counter(position(r) for r in received.values())
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == per_queue
    origins = [
        (s["brokerName"], int(received[s["body"]]["properties"]["RECONSUME_SCHEDULE_OFFSET"]))
        for s in delayed
    ]
    for s, record in zip(delayed, view_records(cluster, origins), strict=True):
        assert (record.topic, record.queue_id) == (SCHEDULE_TOPIC, s["delayLevel"] - 1)
        assert (record.body.decode(), record.uniq_key) == (s["body"], s["msgId"])
        assert record.properties["REAL_TOPIC"] == TOPIC


def test_java_client_group_resumes_from_committed_offsets(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    first = run_driver(
        java_client, cluster, "send", tmp_path / "first", topic=TOPIC, group=GROUP,
        prefix="first run", count=80,
    )  # fmt: skip
    check_protocol(first, CONSUMING)
    assert set(once_each(first["received"])) == {s["body"] for s in first["sent"]}
    ends = committed_at_queue_ends(cluster, GROUP, TOPIC)
    assert ends == Counter(position(s) for s in first["sent"])

    # A new process in the same group (a new client id) starts from the committed offsets:
    # it receives what it sends now and nothing of the first run.
    second = run_driver(
        java_client, cluster, "send", tmp_path / "second", topic=TOPIC, group=GROUP,
        prefix="second run", count=40,
    )  # fmt: skip
    check_protocol(second, CONSUMING)
    (assigned,) = second["assigned"]
    assert queue_set(assigned["queues"], TOPIC) == all_queues()
    received = once_each(second["received"])
    assert set(received) == {s["body"] for s in second["sent"]}
    assert all(r["queueOffset"] >= ends[position(r)] for r in received.values())
    assert len(ends) == len(BROKERS) * QUEUES_PER_BROKER
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(ends) + Counter(
        position(s) for s in second["sent"]
    )
