"""Dead-letter jobs (``reconsume dlq``) on local Spark against a real name server and two
brokers: a 10,000-message drain to Parquet, a filtered reprocess, purge and dry runs, and bad
input refused with nothing advanced."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.message import properties as props
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic
from reconsume.spark.jobs.frames import CONCURRENT_WRITERS
from reconsume.spark.jobs.main import main

from ..integration.cluster import Cluster
from ..integration.wire_client import eventually
from .dead_letters import dead_letter_backlog, fail_into_the_dlq


def orders(topic: str, count: int, prefix: str = "order") -> list[Message]:
    sent = []
    for i in range(count):
        message = Message(topic, f"{prefix}-{i}".encode() + bytes([0, 255]))
        message.tags = "paid" if i % 3 == 0 else "unpaid"
        message.keys = [f"{prefix}-{i}"]
        message.properties["number"] = str(i)
        sent.append(message)
    return sent


def run_job(spark: Any, cluster: Cluster, capsys: Any, *args: str) -> tuple[int, dict[str, Any]]:
    """Run ``reconsume dlq ARGS`` on the tests' session; its exit status and result."""
    code = main([*args, "--name-server", cluster.namesrv.address], spark=spark)
    lines = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(lines[-1])


def test_drain_archives_ten_thousand_dead_letters_to_parquet(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path
) -> None:
    topic, group, count = "jobs-drain", "jobs-drain-consumer", 10_000
    sent = asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count),
                                         queues=2))  # fmt: skip
    assert dead_letter_backlog(spark_cluster, group) == count
    archive = tmp_path / "archive"
    log = tmp_path / "termination-log"
    writers = spark.conf.get(CONCURRENT_WRITERS)

    code, result = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                           "--path", str(archive), "--termination-log", str(log))  # fmt: skip

    assert code == 0, result
    assert spark.conf.get(CONCURRENT_WRITERS) == writers  # the session is left as it was
    assert json.loads(log.read_text()) == result
    assert result["phase"] == "Succeeded"
    assert result["counts"] == {"read": count, "matched": count, "archived": count,
                                "resent": 0, "purged": 0, "kept": 0, "skipped": 0}  # fmt: skip
    assert dead_letter_backlog(spark_cluster, group) == 0
    ends = result["offsets"]["end"][dead_letter_topic(group)]
    assert sum(ends.values()) == count
    rows = spark.read.parquet(str(archive)).collect()
    assert len(rows) == count
    by_origin = {row.originMsgId: row for row in rows}
    assert set(by_origin) == {s.msg_id for s in sent}
    for row in rows:
        i = int(row.properties["number"])
        assert row.body == f"order-{i}".encode() + bytes([0, 255])
        assert row.originTopic == topic
        assert row.keys == [f"order-{i}"]
        assert row.deadLetterReason == "MAX_RECONSUME_TIMES"
        assert str(row.deadLetterDate) == row.deadLetterTime.strftime("%Y-%m-%d")
    assert len({row.archiveRun for row in rows}) == 1
    assert any(p.name.startswith("deadLetterDate=") for p in archive.iterdir())

    # Nothing new: the next run reads nothing and writes nothing.
    code, again = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                          "--path", str(archive))  # fmt: skip
    assert (code, again["counts"]["read"]) == (0, 0)
    assert spark.read.parquet(str(archive)).count() == count


def test_a_filtered_drain_leaves_the_rest_in_place_and_never_raises_the_depth(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path
) -> None:
    topic, group, count = "jobs-drain-some", "jobs-drain-some-consumer", 300
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count),
                                  queues=2))  # fmt: skip
    archive = tmp_path / "archive"
    stored = spark.read.format("reconsume").option("nameServer", spark_cluster.namesrv.address)
    before = {r.msgId: r.tags for r in stored.option("deadLetterGroup", group).load().collect()}
    paid = sum(1 for tags in before.values() if tags == "paid")
    depths: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        while True:
            depths.append(dead_letter_backlog(spark_cluster, group))
            if sampling.wait(0.05):
                return

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        code, result = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                               "--filter", "tags = 'paid'", "--path", str(archive))  # fmt: skip
    finally:
        sampling.set()
        sampler.join()

    assert code == 0, result
    assert result["counts"] == {"read": count, "matched": paid, "archived": paid, "resent": 0,
                                "purged": 0, "kept": count - paid, "skipped": 0}  # fmt: skip
    assert len(depths) > 1
    assert max(depths) == count  # never above where it started
    assert depths == sorted(depths, reverse=True)
    assert dead_letter_backlog(spark_cluster, group) == count - paid
    assert spark.read.parquet(str(archive)).count() == paid
    # Nothing was sent back: the DLQ holds the same messages, with the same ids.
    after = {r.msgId: r.tags for r in stored.option("deadLetterGroup", group).load().collect()}
    assert after == before

    # The next run reads the kept ones only; another filter drains them, and then nothing is left.
    code, again = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                          "--filter", "tags = 'paid'", "--path", str(archive))  # fmt: skip
    assert code == 0, again
    assert (again["counts"]["read"], again["counts"]["matched"]) == (count - paid, 0)
    code, rest = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                         "--filter", "tags = 'unpaid'", "--path", str(archive))  # fmt: skip
    assert code == 0, rest
    assert (rest["counts"]["read"], rest["counts"]["archived"]) == (count - paid, count - paid)
    assert dead_letter_backlog(spark_cluster, group) == 0
    rows = spark.read.parquet(str(archive)).select("msgId").collect()
    assert sorted(r.msgId for r in rows) == sorted(before)


def test_a_filtered_drain_that_matches_nothing_archives_and_acknowledges_nothing(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path
) -> None:
    topic, group, count = "jobs-drain-none", "jobs-drain-none-consumer", 30
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count)))
    archive = str(tmp_path / "archive")
    code, result = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                           "--filter", "tags = 'nobody'", "--path", archive)  # fmt: skip
    assert code == 0, result
    assert (result["counts"]["read"], result["counts"]["kept"]) == (count, count)
    assert dead_letter_backlog(spark_cluster, group) == count


def consume_all(cluster: Cluster, topic: str, group: str, count: int) -> list[StoredMessage]:
    """What a new consumer group of ``topic`` receives, once it has ``count`` messages."""
    received: list[StoredMessage] = []

    async def run() -> None:
        async def take(batch: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
            received.extend(batch)
            return ConsumeStatus.CONSUME_SUCCESS

        settings = ConsumerSettings(instance_name=group)
        consumer = PushConsumer(cluster.name_servers, group, settings=settings)
        consumer.subscribe(topic)
        consumer.register_listener(take)
        await consumer.start()
        try:

            async def all_in() -> bool:
                return len(received) >= count

            await eventually(all_in, 60, what=f"{count} messages on {topic}")
        finally:
            await consumer.shutdown()

    asyncio.run(run())
    return received


def test_reprocess_resends_exactly_the_filtered_subset_and_keeps_the_rest(
    spark: Any, spark_cluster: Cluster, capsys: Any
) -> None:
    topic, group, count = "jobs-payments", "jobs-payments-consumer", 90
    sent = asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count)))
    wanted = {s.msg_id for i, s in enumerate(sent) if i % 3 == 0}  # tags "paid"
    filter_ = "tags = 'paid' and reconsumeTimes >= 1 and originTopic = 'jobs-payments'"

    code, dry = run_job(spark, spark_cluster, capsys, "reprocess", "--group", group,
                        "--filter", filter_, "--dry-run")  # fmt: skip
    assert code == 0, dry
    assert (dry["counts"]["read"], dry["counts"]["matched"], dry["counts"]["resent"]) == (
        count, len(wanted), 0)  # fmt: skip
    assert dead_letter_backlog(spark_cluster, group) == count
    before = [r.msgId for r in spark.read.format("reconsume")
              .option("nameServer", spark_cluster.namesrv.address)
              .option("deadLetterGroup", group).load().select("msgId").collect()]  # fmt: skip

    code, result = run_job(spark, spark_cluster, capsys, "reprocess", "--group", group,
                           "--filter", filter_, "--rate-per-second", "200")  # fmt: skip

    assert code == 0, result
    assert result["counts"] == {"read": count, "matched": len(wanted), "archived": 0,
                                "resent": len(wanted), "purged": 0,
                                "kept": count - len(wanted), "skipped": 0}  # fmt: skip
    # A new group of the topic gets the original messages and the re-sent ones.
    everything = consume_all(spark_cluster, topic, "jobs-payments-fixed", count + len(wanted))
    assert len(everything) == count + len(wanted)
    received = [m for m in everything if "RECONSUME_REPROCESSED" in m.properties]
    assert Counter(m.properties[props.ORIGIN_MESSAGE_ID] for m in received) == Counter(wanted)
    for message in received:
        assert message.tags == "paid"
        assert message.reconsume_times == 0
        assert message.properties["RECONSUME_REPROCESSED"] == f"reprocess-{group}"
        assert message.uniq_key not in wanted
        assert props.DLQ_ORIGIN_TOPIC not in message.properties
        assert message.body.startswith(b"order-")
    # The unmatched stay where they were, the same messages with the same ids (nothing was
    # sent back to the DLQ), with their reconsume times, in the backlog.
    assert dead_letter_backlog(spark_cluster, group) == count - len(wanted)
    stored = spark.read.format("reconsume").option("nameServer", spark_cluster.namesrv.address)
    rows = stored.option("deadLetterGroup", group).load().collect()
    assert sorted(r.msgId for r in rows) == sorted(before)
    kept_rows = [r for r in rows if r.originMsgId not in wanted]
    assert len(kept_rows) == count - len(wanted)
    assert all(r.tags == "unpaid" and r.reconsumeTimes == 1 for r in kept_rows)
    assert {r.originMsgId for r in kept_rows} == {s.msg_id for s in sent} - wanted
    # The next run reads exactly those, and the same filter matches none of them.
    code, again = run_job(spark, spark_cluster, capsys, "reprocess", "--group", group,
                          "--filter", filter_, "--dry-run")  # fmt: skip
    assert code == 0, again
    assert (again["counts"]["read"], again["counts"]["matched"]) == (count - len(wanted), 0)

    # Purge the rest: counted, discarded, the backlog empty.
    code, purged = run_job(spark, spark_cluster, capsys, "purge", "--group", group)
    assert code == 0, purged
    assert purged["counts"]["purged"] == count - len(wanted)
    assert dead_letter_backlog(spark_cluster, group) == 0


@pytest.mark.parametrize(
    ("args", "reason", "message"),
    [
        (("--filter", "tags = = 'x'"), "InvalidFilter", "filter"),
        (("--filter", "noSuchColumn > 1"), "InvalidFilter", "noSuchColumn"),
        (("--filter", "reconsumeTimes + 1"), "InvalidFilter", "not a boolean condition"),
    ],
)
def test_a_bad_filter_fails_and_advances_nothing(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path,
    args: tuple[str, ...], reason: str, message: str,
) -> None:  # fmt: skip
    topic, group = "jobs-bad-filter", "jobs-bad-filter-consumer"
    if dead_letter_backlog(spark_cluster, group) == 0:
        asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, 5)))

    code, result = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                           "--path", str(tmp_path / "a"), *args)  # fmt: skip

    assert code == 1
    assert (result["phase"], result["reason"]) == ("Failed", reason)
    assert message in result["message"]
    assert dead_letter_backlog(spark_cluster, group) == 5
    assert not (tmp_path / "a").exists()


def test_an_unknown_group_and_an_unwritable_sink_fail_clearly(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path
) -> None:
    code, result = run_job(spark, spark_cluster, capsys, "purge", "--group", "no-such-group")
    assert (code, result["reason"]) == (1, "UnknownGroup")
    assert "no-such-group" in result["message"]

    topic, group = "jobs-sink", "jobs-sink-consumer"
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, 4)))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, result = run_job(spark, spark_cluster, capsys, "drain", "--group", group,
                           "--path", str(blocker / "archive"))  # fmt: skip
    assert (code, result["reason"]) == (1, "SinkNotWritable")
    assert str(blocker / "archive") in result["message"]
    assert dead_letter_backlog(spark_cluster, group) == 4


def test_the_examples_filters_are_valid_spark_sql(spark: Any) -> None:
    import yaml

    from reconsume.spark.jobs.frames import check_filter

    root = Path(__file__).resolve().parents[2] / "examples"
    filters = []
    for path in sorted(root.glob("deadletterjob*.yaml")):
        spec = yaml.safe_load(path.read_text())["spec"]
        if "filter" in spec:
            filters.append(spec["filter"])
            check_filter(spark, spec["filter"])
    assert len(filters) >= 3
