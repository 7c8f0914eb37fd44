"""Re-runs after a failure: a reprocess killed mid-way (SIGKILL to the job and its JVM) sends
every matched dead letter exactly once over both runs; a drain that died after its archive
committed is finished by the re-run without writing the archive again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_topic
from reconsume.spark import ledger
from reconsume.spark.jobs import main
from reconsume.spark.jobs.main import Run
from reconsume.spark.offsets import QueueKey

from ..integration.cluster import Cluster
from ..integration.wire_client import eventually
from .dead_letters import backlog_async, dead_letter_backlog, fail_into_the_dlq
from .test_jobs import orders, run_job


async def stored_async(cluster: Cluster, topic: str) -> int:
    async with AdminClient(cluster.name_servers) as admin:
        return await admin.topic_depth(topic)


def stored(cluster: Cluster, topic: str) -> int:
    return asyncio.run(stored_async(cluster, topic))


@pytest.mark.parametrize("filtered", [True, False], ids=["filtered", "every-dead-letter"])
def test_a_killed_reprocess_rerun_sends_each_dead_letter_once(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path, filtered: bool
) -> None:
    # Filtered, the job re-sends through the DataFrame and the writer; without a filter its
    # tasks read and send in one pass (reconsume.spark.jobs.resend): the same ledger.
    suffix = "filtered" if filtered else "all"
    topic, group, count = f"jobs-restart-{suffix}", f"jobs-restart-consumer-{suffix}", 600
    sent = asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count),
                                         queues=2))  # fmt: skip
    dlq = dead_letter_topic(group)
    wanted = {s.msg_id for i, s in enumerate(sent) if i % 3 != 0 or not filtered}
    filter_args = ["--filter", "tags = 'unpaid'"] if filtered else []
    args = ["reprocess", "--group", group, *filter_args,
            "--name-server", spark_cluster.namesrv.address]  # fmt: skip
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    log = (tmp_path / "first.log").open("wb")
    command = [sys.executable, "-m", "reconsume.cli", "dlq", *args, "--master", "local[2]",
               "--rate-per-second", "100", "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.host=127.0.0.1"]  # fmt: skip
    first = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:

        async def sending() -> bool:
            if first.poll() is not None:
                output = (tmp_path / "first.log").read_text()
                raise AssertionError(f"the job ended early: {output}")
            return await stored_async(spark_cluster, topic) - count >= 150

        asyncio.run(eventually(sending, 120, what="the first run sending"))
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        log.close()
    assert stored(spark_cluster, topic) - count >= 150
    # Nothing marked handled: every dead letter stored is in the backlog (the kept ones are
    # never sent anywhere).

    async def nothing_handled() -> bool:
        return await backlog_async(spark_cluster, group) == await stored_async(spark_cluster, dlq)

    asyncio.run(eventually(nothing_handled, 10, what="the backlog to be every dead letter"))

    code, result = run_job(spark, spark_cluster, capsys, *args[:-2])

    assert code == 0, result
    counts = result["counts"]
    assert (counts["read"], counts["matched"]) == (count, len(wanted))
    assert counts["resent"] + counts["skipped"] - (count - len(wanted)) >= 0
    resent = spark.read.format("reconsume").option("nameServer", spark_cluster.namesrv.address)
    rows = (
        resent.option("topic", topic).load()
        .where(F.col("properties").getItem("RECONSUME_REPROCESSED").isNotNull())
        .select("originMsgId").collect()
    )  # fmt: skip
    arrived = Counter(r.originMsgId for r in rows)
    assert set(arrived) == wanted
    assert max(arrived.values()) == 1, [k for k, v in arrived.items() if v > 1][:5]
    # Sent by the first run and skipped by the second, or sent by the second: each once.
    assert counts["resent"] < len(wanted)
    assert counts["kept"] + counts["resent"] + counts["skipped"] == count
    assert dead_letter_backlog(spark_cluster, group) == count - len(wanted)
    assert json.dumps(result)


@pytest.mark.parametrize("crash_before", ["archived-entry", "offsets"])
def test_a_drain_that_died_after_its_archive_committed_is_finished_not_repeated(
    spark: Any, spark_cluster: Cluster, capsys: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, crash_before: str,
) -> None:  # fmt: skip
    topic, group, count = f"jobs-drain-crash-{crash_before}", f"drain-crash-{crash_before}", 40
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count)))
    archive = str(tmp_path / "archive")
    args = ("drain", "--group", group, "--path", archive)

    class Died(Exception):
        """The process ending where a real crash could."""

    original_append, original_handled = Run._append, Run._handled

    async def append(self: Run, scope: Any, entry: ledger.Entry) -> None:
        if crash_before == "archived-entry" and entry.kind == ledger.ARCHIVED:
            raise Died
        await original_append(self, scope, entry)

    async def handled(self: Run, scope: Any) -> None:
        if crash_before == "offsets":
            raise Died
        await original_handled(self, scope)

    with monkeypatch.context() as patched:
        patched.setattr(Run, "_append", append)
        patched.setattr(Run, "_handled", handled)
        code, failed = run_job(spark, spark_cluster, capsys, *args)
    assert (code, failed["phase"]) == (1, "Failed")
    assert spark.read.parquet(archive).count() == count  # the archive was committed
    assert dead_letter_backlog(spark_cluster, group) == count  # the offsets were not

    # Nothing of the failed attempt is in flight here: the re-run need not wait long for it.
    monkeypatch.setattr(main, "SETTLE_S", 0.5)
    code, result = run_job(spark, spark_cluster, capsys, *args)

    assert code == 0, result
    assert result["counts"]["skipped"] == count
    assert result["counts"]["archived"] == 0
    assert spark.read.parquet(archive).count() == count  # not written twice
    assert dead_letter_backlog(spark_cluster, group) == 0


def test_a_run_refuses_to_start_while_another_attempt_of_its_job_keeps_writing(
    spark: Any, spark_cluster: Cluster, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group, count = "jobs-concurrent", "jobs-concurrent-consumer", 10
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count)))
    args = ("purge", "--group", group)

    async def died(self: Run, scope: Any) -> None:
        raise RuntimeError("died before its offsets moved")

    with monkeypatch.context() as patched:  # an attempt that leaves its ledger entries
        patched.setattr(Run, "_handled", died)
        code, failed = run_job(spark, spark_cluster, capsys, *args)
    assert (code, failed["phase"]) == (1, "Failed")
    monkeypatch.setattr(main, "SETTLE_S", 0.5)
    writing, stop = threading.Event(), threading.Event()

    async def other_attempt() -> None:  # the same job, still writing
        entry = ledger.Entry(f"purge-{group}", ledger.STARTED, QueueKey("broker-a", 0), 0, 0)
        async with Producer(spark_cluster.name_servers, "other-attempt") as producer:
            while not stop.is_set():
                await producer.send(Message(ledger.LEDGER_TOPIC, entry.to_json()))
                writing.set()
                await asyncio.sleep(0.1)

    thread = threading.Thread(target=asyncio.run, args=(other_attempt(),))
    thread.start()
    try:
        assert writing.wait(30)
        code, result = run_job(spark, spark_cluster, capsys, *args)
    finally:
        stop.set()
        thread.join()
    assert (code, result["phase"], result["reason"]) == (1, "Failed", "ConcurrentRun")
    assert "two runs of one job must not overlap" in result["message"]
    assert dead_letter_backlog(spark_cluster, group) == count  # nothing purged
