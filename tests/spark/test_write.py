"""Writes through the ``reconsume`` data source used directly, local-mode Spark against a real
name server and two brokers: a batch write over two topics reads back exactly and reports
exact counts; a streaming copy from one topic to another, restarted from its checkpoint, copies
every message once; a frame without the columns a send needs is refused before anything is
sent."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer, SendResult
from reconsume.message import properties as props
from reconsume.message.model import Message

from ..integration.cluster import Cluster, create_topic, send_all
from ..polling import eventually
from .test_read import QUEUES_PER_BROKER, read
from .test_stream import RUN_TIMEOUT_S

WRITE_SCHEMA = (
    "topic string, body binary, properties map<string,string>, tags string, keys array<string>"
)
READ_BACK_TIMEOUT_S = 30
# Properties the producer or broker adds or the columns set: everything else a row's
# properties hold reads back as written.
SYSTEM_PROPERTIES = {props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, props.TAGS, props.KEYS, props.CLUSTER}


def create_topics(cluster: Cluster, *topics: str) -> None:
    async def run() -> None:
        async with AdminClient(cluster.name_servers) as admin:
            for topic in topics:
                await create_topic(admin, topic, QUEUES_PER_BROKER)

    asyncio.run(run())


def produce_unique(cluster: Cluster, topic: str, prefix: str, count: int) -> list[SendResult]:
    """``count`` messages whose bodies ``<prefix>-<i>`` are unique over the test."""
    batch: list[Message] = []
    for i in range(count):
        message = Message(topic, f"{prefix}-{i}".encode() + bytes([0, 255]))
        message.tags = f"tag-{i % 3}"
        message.keys = [f"{prefix}-key-{i}"]
        message.properties["number"] = str(i)
        batch.append(message)

    async def run() -> list[SendResult]:
        async with Producer(cluster.name_servers) as producer:
            return await send_all(producer, batch)

    return asyncio.run(run())


def read_until(spark: Any, cluster: Cluster, topic: str, count: int) -> list[Any]:
    """The messages of ``topic`` once it holds at least ``count`` (deadline, short pauses)."""
    found: list[Any] = []

    def probe() -> bool:
        found[:] = read(spark, cluster, topic=topic)
        return len(found) >= count

    eventually(probe, READ_BACK_TIMEOUT_S, f"{count} messages in {topic}")
    return found


def writer(frame: Any, cluster: Cluster, report: Path) -> Any:
    return (
        frame.write.format("reconsume")
        .option("nameServer", cluster.namesrv.address)
        .option("reportPath", str(report))
        .mode("append")
    )


# ------------------------------------------------------------------ batch


def rows_to_write(topics: tuple[str, str], count: int) -> list[dict[str, Any]]:
    return [
        {
            "topic": topics[1] if i % 3 == 0 else topics[0],
            "body": f"write-{i}".encode() + bytes([0, 1, 255]),
            "properties": {"number": str(i), "parity": "even" if i % 2 == 0 else "odd"},
            "tags": None if i % 5 == 0 else f"tag-{i % 4}",
            "keys": [] if i % 7 == 0 else [f"key-{i}", f"order-{i // 10}"],
        }
        for i in range(count)
    ]


def test_a_batch_write_over_two_topics_reads_back_exactly(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topics = ("spark-write-orders", "spark-write-audit")
    create_topics(spark_cluster, *topics)
    rows = rows_to_write(topics, 100)
    expected = Counter(row["topic"] for row in rows)
    assert expected == {topics[0]: 66, topics[1]: 34}
    report = tmp_path / "report.json"
    # Three tasks, each sending to both topics: the commit adds their counts up.
    frame = spark.createDataFrame(rows, WRITE_SCHEMA).repartition(3)

    writer(frame, spark_cluster, report).save()

    assert json.loads(report.read_text()) == {"sent": dict(expected), "skipped": 0}
    by_number: dict[int, dict[str, Any]] = {int(row["properties"]["number"]): row for row in rows}
    for topic in topics:
        stored = read_until(spark, spark_cluster, topic, expected[topic])
        assert len(stored) == expected[topic]
        numbers = sorted(int(message.properties["number"]) for message in stored)
        assert numbers == sorted(n for n, row in by_number.items() if row["topic"] == topic)
        for message in stored:
            row = by_number[int(message.properties["number"])]
            assert message.topic == topic
            assert message.body == row["body"]
            assert message.tags == row["tags"]
            assert message.keys == row["keys"]
            user = {k: v for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES}
            assert user == row["properties"]
            assert (message.tags is None) == (props.TAGS not in message.properties)
            assert message.reconsumeTimes == 0
        # Every message got an id of its own.
        assert len({message.msgId for message in stored}) == expected[topic]


def test_a_string_body_column_is_sent_as_utf_8(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic = "spark-write-text"
    create_topics(spark_cluster, topic)
    bodies = ["plain", "día ✓", ""]
    frame = spark.createDataFrame([(topic, body) for body in bodies], "topic string, body string")
    report = tmp_path / "report.json"

    writer(frame, spark_cluster, report).save()

    assert json.loads(report.read_text()) == {"sent": {topic: 3}, "skipped": 0}
    stored = read_until(spark, spark_cluster, topic, len(bodies))
    assert sorted(bytes(message.body) for message in stored) == sorted(b.encode() for b in bodies)
    assert all(message.tags is None and message.keys == [] for message in stored)


# ------------------------------------------------------------------ streaming


def copy_available_now(
    spark: Any, cluster: Cluster, source: str, target: str, root: Path
) -> list[dict[str, Any]]:
    """Copy what ``source`` holds now to ``target`` (checkpoint ``root/checkpoint``); the
    report lines of this run's batches."""
    report = root / "report.jsonl"
    before = report.read_text().splitlines() if report.exists() else []
    frame = (
        spark.readStream.format("reconsume")
        .option("nameServer", cluster.namesrv.address)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(f"'{target}' AS topic", "body", "properties", "tags", "keys")
    )
    query = (
        frame.writeStream.format("reconsume")
        .option("nameServer", cluster.namesrv.address)
        .option("reportPath", str(report))
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(RUN_TIMEOUT_S), f"not done within {RUN_TIMEOUT_S}s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    lines = report.read_text().splitlines() if report.exists() else []
    assert lines[: len(before)] == before  # appended to, never rewritten
    return [json.loads(line) for line in lines[len(before) :]]


def sent_to(batches: list[dict[str, Any]], topic: str) -> int:
    assert all(batch["skipped"] == 0 for batch in batches), batches
    return sum(batch["sent"].get(topic, 0) for batch in batches)


def test_a_streaming_copy_restarted_from_its_checkpoint_copies_every_message_once(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    source, target = "spark-write-stream-in", "spark-write-stream-out"
    create_topics(spark_cluster, source, target)
    first = produce_unique(spark_cluster, source, "first", 30)

    batches = copy_available_now(spark, spark_cluster, source, target, tmp_path)

    assert sent_to(batches, target) == len(first)
    copied = read_until(spark, spark_cluster, target, len(first))
    # The copies keep the originals' properties, their ids (UNIQ_KEY) among them.
    assert sorted(message.msgId for message in copied) == sorted(s.msg_id for s in first)

    second = produce_unique(spark_cluster, source, "second", 25)
    later = copy_available_now(spark, spark_cluster, source, target, tmp_path)

    assert sent_to(later, target) == len(second)  # only the new ones
    assert min(b["batchId"] for b in later) > max(b["batchId"] for b in batches)
    copied = read_until(spark, spark_cluster, target, len(first + second))
    assert len(copied) == len(first + second)  # none twice
    assert sorted(message.msgId for message in copied) == sorted(s.msg_id for s in first + second)
    originals = {message.msgId: message for message in read(spark, spark_cluster, topic=source)}
    for message in copied:
        original = originals[message.msgId]
        assert message.topic == target
        assert message.body == original.body
        assert (message.tags, message.keys) == (original.tags, original.keys)
        assert message.properties["number"] == original.properties["number"]

    # Nothing new: a third run copies nothing.
    assert sent_to(copy_available_now(spark, spark_cluster, source, target, tmp_path), target) == 0
    assert len(read(spark, spark_cluster, topic=target)) == len(first + second)


# ------------------------------------------------------------------ refusals


def test_a_frame_without_a_topic_column_is_refused(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    frame = spark.createDataFrame([(b"lost",)], "body binary")
    report = tmp_path / "report.json"

    with pytest.raises(Exception, match="the rows to send have no column 'topic'"):
        writer(frame, spark_cluster, report).save()

    assert not report.exists()


def test_a_column_of_the_wrong_type_is_refused_before_anything_is_sent(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic = "spark-write-refused"
    create_topics(spark_cluster, topic)
    # Every row could be sent but for its tags, which are numbers.
    frame = spark.createDataFrame(
        [(topic, b"a", 1), (topic, b"b", 2)], "topic string, body binary, tags int"
    )
    report = tmp_path / "report.json"

    with pytest.raises(Exception, match="column 'tags' is int, not string"):
        writer(frame, spark_cluster, report).save()

    assert not report.exists()
    assert read(spark, spark_cluster, topic=topic) == []


def test_a_stream_without_a_topic_column_is_refused(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    source = "spark-write-stream-refused"
    create_topics(spark_cluster, source)
    produce_unique(spark_cluster, source, "refused", 3)
    frame = (
        spark.readStream.format("reconsume")
        .option("nameServer", spark_cluster.namesrv.address)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("body")
    )
    report = tmp_path / "report.jsonl"

    def run() -> None:
        query = (
            frame.writeStream.format("reconsume")
            .option("nameServer", spark_cluster.namesrv.address)
            .option("reportPath", str(report))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(RUN_TIMEOUT_S)
        finally:
            query.stop()

    with pytest.raises(Exception, match="the rows to send have no column 'topic'"):
        run()
    assert not report.exists()
