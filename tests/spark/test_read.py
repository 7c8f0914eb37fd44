"""Batch reads through the ``reconsume`` data source, local-mode Spark against a real name
server and two brokers: a topic read back exactly, offsets restricting the range, and a group's
dead letters with their origin and reason."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer, SendResult
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_topic

from ..integration.cluster import Cluster, create_topic, send_all
from .dead_letters import fail_into_the_dlq

QUEUES_PER_BROKER = 2
COUNT = 40


def messages(topic: str, count: int) -> list[Message]:
    sent: list[Message] = []
    for i in range(count):
        message = Message(topic, f"body-{i}".encode() + bytes([0, 255]))
        message.tags = "even" if i % 2 == 0 else "odd"
        message.keys = [f"key-{i}", f"order-{i // 10}"]
        message.properties["number"] = str(i)
        sent.append(message)
    return sent


def produce(cluster: Cluster, topic: str, count: int = COUNT) -> list[SendResult]:
    async def run() -> list[SendResult]:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, topic, QUEUES_PER_BROKER)
        async with Producer(cluster.name_servers) as producer:
            return await send_all(producer, messages(topic, count))

    return asyncio.run(run())


def read(spark: Any, cluster: Cluster, **options: str) -> list[Any]:
    reader = spark.read.format("reconsume").option("nameServer", cluster.namesrv.address)
    for name, value in options.items():
        reader = reader.option(name, value)
    return list(reader.load().collect())


def test_a_topic_reads_back_exactly(spark: Any, spark_cluster: Cluster) -> None:
    topic = "spark-orders"
    sent = produce(spark_cluster, topic)

    rows = read(spark, spark_cluster, topic=topic)

    assert len(rows) == COUNT
    by_id = {row.msgId: row for row in rows}
    assert set(by_id) == {s.msg_id for s in sent}
    offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for result in sent:
        row = by_id[result.msg_id]
        i = int(row.properties["number"])
        assert row.body == f"body-{i}".encode() + bytes([0, 255])
        assert row.topic == topic
        assert row.tags == ("even" if i % 2 == 0 else "odd")
        assert row.keys == [f"key-{i}", f"order-{i // 10}"]
        assert row.properties[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
        assert (row.broker, row.queueId, row.queueOffset) == (
            result.queue.broker_name,
            result.queue.queue_id,
            result.queue_offset,
        )
        assert row.storeTimestamp >= row.bornTimestamp.replace(microsecond=0)
        assert row.reconsumeTimes == 0
        assert row.originMsgId is None
        assert row.deadLetterReason is None
        assert row.deadLetterTime is None
        offsets[(row.broker, row.queueId)].append(row.queueOffset)
    # Every queue of both brokers, each read whole and in order.
    assert len(offsets) == 2 * QUEUES_PER_BROKER
    assert {b for b, _ in offsets} == {"broker-a", "broker-b"}
    for found in offsets.values():
        assert sorted(found) == list(range(len(found)))
    commit_log_offsets = [row.commitLogOffset for row in rows]
    assert len(set(zip(commit_log_offsets, (r.broker for r in rows), strict=True))) == COUNT


def test_offsets_restrict_the_range(spark: Any, spark_cluster: Cluster) -> None:
    topic = "spark-ranges"
    sent = produce(spark_cluster, topic)
    per_queue: dict[str, int] = defaultdict(int)
    for result in sent:
        per_queue[f"{result.queue.broker_name}:{result.queue.queue_id}"] += 1
    assert per_queue["broker-a:0"] >= 5, per_queue

    starting = {topic: {"broker-a:0": 2, "broker-b:0": -1}}
    ending = {topic: {"broker-a:0": 5, "broker-b:1": 1, "broker-a:1": -1}}
    rows = read(
        spark,
        spark_cluster,
        topic=topic,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )

    got: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        got[f"{row.broker}:{row.queueId}"].append(row.queueOffset)
    assert {k: sorted(v) for k, v in got.items()} == {
        "broker-a:0": [2, 3, 4],
        "broker-a:1": list(range(per_queue["broker-a:1"])),
        "broker-b:1": [0],
    }
    assert read(spark, spark_cluster, topic=topic, startingOffsets="latest") == []
    unknown_queue = json.dumps({topic: {"broker-c:0": 1}})
    with pytest.raises(Exception, match=r"no queues \['broker-c:0'\]"):
        read(spark, spark_cluster, topic=topic, endingOffsets=unknown_queue)


def test_a_groups_dead_letters_read_with_their_origin(spark: Any, spark_cluster: Cluster) -> None:
    topic, group = "spark-invoices", "spark-invoices-consumer"
    count = 12

    sent = asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, messages(topic, count)))

    rows = read(spark, spark_cluster, deadLetterGroup=group)

    assert len(rows) == count
    assert {row.originMsgId for row in rows} == {s.msg_id for s in sent}
    for row in rows:
        assert row.topic == dead_letter_topic(group)
        assert row.originTopic == topic
        assert row.deadLetterReason == "MAX_RECONSUME_TIMES"
        assert row.deadLetterTime is not None
        assert row.deadLetterTime >= row.bornTimestamp.replace(microsecond=0)
        assert row.reconsumeTimes == 1
        assert row.body.startswith(b"body-")
        assert row.properties[props.DLQ_ORIGIN_TOPIC] == topic
    # Each broker dead-letters what it stored, in %DLQ%<group> queue 0 of its own.
    per_broker: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        assert row.queueId == 0
        per_broker[row.broker].append(row.queueOffset)
    assert sum(len(found) for found in per_broker.values()) == count
    for found in per_broker.values():
        assert sorted(found) == list(range(len(found)))


def test_a_group_without_dead_letters_reads_empty_and_an_unknown_one_fails(
    spark: Any, spark_cluster: Cluster
) -> None:
    group = "spark-quiet-consumer"

    async def create() -> None:
        async with AdminClient(spark_cluster.name_servers) as admin:
            await admin.create_group(SubscriptionGroupConfig(group))

    asyncio.run(create())
    assert read(spark, spark_cluster, deadLetterGroup=group) == []
    with pytest.raises(Exception, match="no broker knows consumer group spark-nobody"):
        read(spark, spark_cluster, deadLetterGroup="spark-nobody")
    with pytest.raises(Exception, match="no name server routes topic spark-missing"):
        read(spark, spark_cluster, topic="spark-missing")


def test_the_end_offsets_are_fixed_when_the_read_is_planned(
    spark: Any, spark_cluster: Cluster
) -> None:
    # Imported here: without pyspark the spark fixture skips (or fails in CI) instead.
    from reconsume.spark.reading import ReadOptions
    from reconsume.spark.source import ReconsumeReader

    topic = "spark-scope"
    first = produce(spark_cluster, topic, 10)
    reader = ReconsumeReader(
        ReadOptions.parse({"NameServer": spark_cluster.namesrv.address, "topic": topic})
    )
    later = produce(spark_cluster, topic, 10)  # arrives after planning: out of scope

    partitions = reader.partitions()
    ids = [
        msg_id
        for partition in partitions
        for batch in reader.read(partition)
        for msg_id in batch.column("msgId").to_pylist()
    ]

    assert sorted(ids) == sorted(s.msg_id for s in first)
    assert not {s.msg_id for s in later} & set(ids)
    assert len(partitions) == len({(s.queue.broker_name, s.queue.queue_id) for s in first})


@pytest.mark.parametrize("in_flight", ["1", "4"])
def test_pulls_sent_ahead_of_short_answers_lose_and_repeat_nothing(
    spark: Any, spark_cluster: Cluster, in_flight: str
) -> None:
    # 400 KiB bodies: the broker's 4 MiB a bulk pull cuts the first answer of 256 to ten, so
    # the pulls sent ahead start at the wrong offsets and go again from where the answer ends
    # (and ask for ten from then on).
    topic = f"spark-large-{in_flight}"
    bodies = [random.Random(i).randbytes(400_000) for i in range(40)]  # incompressible
    large = [Message(topic, body, properties={"number": str(i)}) for i, body in enumerate(bodies)]

    async def run() -> list[SendResult]:
        async with AdminClient(spark_cluster.name_servers) as admin:
            await create_topic(admin, topic, 1)
        async with Producer(spark_cluster.name_servers) as producer:
            return await send_all(producer, large)

    sent = asyncio.run(run())
    rows = read(spark, spark_cluster, topic=topic, pullsInFlight=in_flight)

    assert sorted(row.msgId for row in rows) == sorted(s.msg_id for s in sent)
    for row in rows:
        assert row.body == bodies[int(row.properties["number"])]
    by_queue: dict[tuple[str, int], list[int]] = defaultdict(list)
    for row in rows:
        by_queue[(row.broker, row.queueId)].append(row.queueOffset)
    for offsets in by_queue.values():
        assert offsets == list(range(len(offsets)))
