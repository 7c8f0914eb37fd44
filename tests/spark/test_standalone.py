"""Dead-letter jobs on a Spark standalone master with two workers (``spark://``, as a
DeadLetterJob's ``spec.spark.master`` may name one): ``reconsume dlq`` in its own process, its
executors on the workers, against a real name server and two brokers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.spark_standalone import standalone_cluster

from reconsume.message.names import dead_letter_topic

from ..integration.cluster import Cluster
from .dead_letters import dead_letter_backlog, fail_into_the_dlq
from .test_jobs import orders

RECONSUME = Path(sys.executable).with_name("reconsume")


def dlq(cluster: Cluster, master: str, log: Path, *args: str) -> dict[str, Any]:
    """``reconsume dlq ARGS`` on ``master``; its result (it must succeed)."""
    done = subprocess.run(
        [str(RECONSUME), "dlq", *args, "--name-server", cluster.namesrv.address,
         "--master", master, "--termination-log", str(log),
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.cores=1",
         "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2"],
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    result: dict[str, Any] = json.loads(log.read_text())
    return result


def executor_dirs(root: Path) -> set[str]:
    """The workers that ran an executor: each one's ``app-*/<executor id>`` directory."""
    return {
        worker.name
        for worker in root.glob("worker-*")
        if any(app.is_dir() and any(app.iterdir()) for app in worker.glob("app-*"))
    }


@pytest.mark.timeout(600)
def test_a_reprocess_and_a_drain_run_on_a_standalone_master_with_two_workers(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    topic, group, count = "standalone-orders", "standalone-consumer", 3_000
    asyncio.run(fail_into_the_dlq(spark_cluster, topic, group, orders(topic, count),
                                  queues=2))  # fmt: skip
    assert dead_letter_backlog(spark_cluster, group) == count
    paid = len(range(0, count, 3))
    # a second group's dead letters, re-sent without a filter: tasks that read and send in
    # one pass (reconsume.spark.jobs.resend), shipped to the workers as Spark tasks
    every_topic, every_group, every_count = "standalone-all", "standalone-all-consumer", 1_000
    asyncio.run(fail_into_the_dlq(spark_cluster, every_topic, every_group,
                                  orders(every_topic, every_count), queues=2))  # fmt: skip

    with standalone_cluster(tmp_path / "spark", workers=2, memory="1g") as cluster:
        resent = dlq(spark_cluster, cluster.master_url, tmp_path / "reprocess.json",
                     "reprocess", "--group", group, "--filter", "tags = 'paid'")  # fmt: skip
        everything = dlq(spark_cluster, cluster.master_url, tmp_path / "every.json",
                         "reprocess", "--group", every_group)  # fmt: skip
        archive = tmp_path / "archive"
        drained = dlq(spark_cluster, cluster.master_url, tmp_path / "drain.json",
                      "drain", "--group", group, "--path", str(archive))  # fmt: skip
        ran_on = executor_dirs(tmp_path / "spark")

    assert resent["phase"] == "Succeeded", resent
    assert resent["counts"]["read"] == count
    assert (resent["counts"]["resent"], resent["counts"]["kept"]) == (paid, count - paid)
    assert everything["phase"] == "Succeeded", everything
    counts = everything["counts"]
    assert (counts["read"], counts["resent"], counts["kept"]) == (every_count, every_count, 0)
    assert dead_letter_backlog(spark_cluster, every_group) == 0
    assert drained["phase"] == "Succeeded", drained
    assert drained["counts"]["archived"] == count - paid  # the kept ones, nothing twice
    assert dead_letter_backlog(spark_cluster, group) == 0
    rows = spark.read.parquet(str(archive)).collect()
    assert sorted(int(r.properties["number"]) for r in rows) == [
        i for i in range(count) if i % 3 != 0
    ]
    assert {r.originTopic for r in rows} == {topic}
    assert ran_on == {"worker-0", "worker-1"}, "both workers ran executors"
    ends = drained["offsets"]["end"][dead_letter_topic(group)]
    assert sum(ends.values()) == count
