"""Streaming reads through the ``reconsume`` data source, local-mode Spark against a real name
server and two brokers: Trigger.AvailableNow runs into a Parquet sink, restarted from their
checkpoint, read every message exactly once; maxMessagesPerTrigger bounds each micro-batch; a
group's dead letters stream in once the dead-letter queue appears."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer, SendResult
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.names import dead_letter_topic

from ..integration.cluster import Cluster, send_all
from ..polling import eventually
from .dead_letters import fail_into_the_dlq
from .test_read import QUEUES_PER_BROKER, messages, produce

RUN_TIMEOUT_S = 120


def stream(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = spark.readStream.format("reconsume").option("nameServer", cluster.namesrv.address)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_available_now(frame: Any, root: Path) -> list[dict[str, Any]]:
    """Run ``frame`` into the Parquet sink ``root/out`` with checkpoint ``root/checkpoint``
    until it has read what was available when it started; its progress, one per batch (the
    offsets in it parsed from JSON)."""
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(RUN_TIMEOUT_S), f"not done within {RUN_TIMEOUT_S}s"
        return [json.loads(progress.json) for progress in query.recentProgress]
    finally:
        query.stop()


def written(spark: Any, root: Path) -> list[Any]:
    """Every row the Parquet sink at ``root/out`` committed."""
    if not (root / "out").exists():
        return []
    return list(spark.read.parquet(str(root / "out")).collect())


def input_rows(progress: list[dict[str, Any]]) -> list[int]:
    """The number of messages of each batch that read any."""
    return [p["numInputRows"] for p in progress if p["numInputRows"] > 0]


def produce_more(cluster: Cluster, topic: str, count: int) -> list[SendResult]:
    async def run() -> list[SendResult]:
        async with Producer(cluster.name_servers) as producer:
            return await send_all(producer, messages(topic, count))

    return asyncio.run(run())


def test_restarts_from_the_checkpoint_read_every_message_exactly_once(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic = "spark-stream-orders"
    first = produce(spark_cluster, topic, 30)
    frame = stream(spark, spark_cluster, topic=topic, startingOffsets="earliest")

    run_available_now(frame, tmp_path)

    rows = written(spark, tmp_path)
    assert sorted(row.msgId for row in rows) == sorted(s.msg_id for s in first)

    second = produce_more(spark_cluster, topic, 25)
    progress = run_available_now(frame, tmp_path)

    rows = written(spark, tmp_path)
    assert sorted(row.msgId for row in rows) == sorted(s.msg_id for s in first + second)
    assert sum(input_rows(progress)) == len(second)  # the restart read only the new ones
    # Each queue read whole, once and in order over the two runs.
    by_queue: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        by_queue.setdefault((row.broker, row.queueId), []).append(row.queueOffset)
    assert len(by_queue) == 2 * QUEUES_PER_BROKER
    assert all(sorted(found) == list(range(len(found))) for found in by_queue.values())
    # The checkpointed offsets are the Kafka shape: the next offset of each queue.
    assert progress[-1]["sources"][0]["endOffset"] == {
        topic: {f"{b}:{q}": len(found) for (b, q), found in sorted(by_queue.items())}
    }


def test_a_running_query_reads_messages_as_they_arrive(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic, table = "spark-stream-live", "reconsume_live"
    first = produce(spark_cluster, topic, 20)
    frame = stream(spark, spark_cluster, topic=topic, startingOffsets="earliest")
    query = (
        frame.writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:

        def ids() -> list[str]:
            error = query.exception()
            assert error is None, error
            return sorted(row.msgId for row in spark.table(table).select("msgId").collect())

        eventually(lambda: len(ids()) >= len(first), 60, "the first messages read")
        second = produce_more(spark_cluster, topic, 15)
        eventually(lambda: len(ids()) >= len(first + second), 60, "the later messages read")
        assert ids() == sorted(s.msg_id for s in first + second)

        # reportLatestOffset: each queue's latest offset, in the query's progress (written after
        # the sink shows a batch's rows, so an earlier batch's progress may be read first).
        def latest() -> int | None:
            offsets = last_source_progress(query).get("latestOffset") or {}
            total = sum(offsets.get(topic, {}).values())
            return total if total == len(first + second) else None

        eventually(latest, 10, "progress of every message")
    finally:
        query.stop()


def last_source_progress(query: Any) -> dict[str, Any]:
    """The query's last progress of its source, offsets parsed from JSON ({} before any)."""
    progress = query.lastProgress
    return {} if progress is None else dict(json.loads(progress.json)["sources"][0])


def test_max_messages_per_trigger_bounds_each_batch(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic = "spark-stream-limited"
    old = produce(spark_cluster, topic, 10)
    # The default start is latest: the first run checkpoints the queues' ends, reading none.
    run_available_now(stream(spark, spark_cluster, topic=topic), tmp_path)
    assert written(spark, tmp_path) == []

    new = produce_more(spark_cluster, topic, 40)
    limit = 7
    frame = stream(spark, spark_cluster, topic=topic, maxMessagesPerTrigger=str(limit))
    progress = run_available_now(frame, tmp_path)

    rows = written(spark, tmp_path)
    assert sorted(row.msgId for row in rows) == sorted(s.msg_id for s in new)
    assert not {s.msg_id for s in old} & {row.msgId for row in rows}
    sizes = input_rows(progress)
    assert sizes == [limit] * (len(new) // limit) + [len(new) % limit], sizes
    # Every queue with a backlog made progress in the first batch, in proportion to it.
    backlog = Counter(f"{s.queue.broker_name}:{s.queue.queue_id}" for s in new)
    batch = next(p for p in progress if p["numInputRows"] > 0)["sources"][0]
    start, end = batch["startOffset"][topic], batch["endOffset"][topic]
    taken = {queue: end[queue] - start[queue] for queue in end}
    assert sum(taken.values()) == limit
    spare, beyond = limit - len(backlog), len(new) - len(backlog)
    for queue, waiting in backlog.items():
        fair = 1 + spare * (waiting - 1) / beyond  # one each, the rest in proportion
        assert abs(taken[queue] - fair) < 1, (taken, backlog)


def test_a_groups_dead_letters_stream_in_once_its_dead_letter_queue_appears(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic, group = "spark-stream-invoices", "spark-stream-invoices-consumer"
    count = 12

    async def create_group() -> None:
        async with AdminClient(spark_cluster.name_servers) as admin:
            await admin.create_group(SubscriptionGroupConfig(group))

    asyncio.run(create_group())
    frame = stream(spark, spark_cluster, deadLetterGroup=group)
    # No dead letter yet, so no route for %DLQ%<group>: the stream reads nothing so far.
    run_available_now(frame, tmp_path)
    assert written(spark, tmp_path) == []

    sent = asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, messages(topic, count)))
    run_available_now(frame, tmp_path)

    # The dead-letter queues appeared after the stream started: read from their earliest.
    rows = written(spark, tmp_path)
    assert sorted(row.originMsgId for row in rows) == sorted(s.msg_id for s in sent)
    for row in rows:
        assert row.topic == dead_letter_topic(group)
        assert row.originTopic == topic
        assert row.deadLetterReason == "MAX_RECONSUME_TIMES"


def test_ending_offsets_are_refused_for_streams(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    frame = stream(spark, spark_cluster, topic="spark-stream-any", endingOffsets="latest")
    with pytest.raises(Exception, match="endingOffsets is for batch reads, not streams"):
        run_available_now(frame, tmp_path)
