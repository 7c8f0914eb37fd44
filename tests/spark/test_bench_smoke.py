"""The dead-letter job benchmark still runs: ``bench.dlq_jobs`` at its ``--quick`` sizes (5,000
dead letters a case) on the tier's SparkSession and brokers. It checks every job's counts itself
(and raises when they are wrong); this checks that it works, never how fast it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import dlq_jobs

from ..integration.cluster import Cluster


def test_quick_dead_letter_job_benchmark(
    spark: Any, spark_cluster: Cluster, tmp_path: Path
) -> None:
    lines: list[str] = []
    document = dlq_jobs.measure(
        spark_cluster.namesrv.address, spark, dlq_jobs.Sizes.quick(), tmp_path,
        tag="-smoke", report=lines.append,
    )  # fmt: skip

    assert [row["case"] for row in document["results"]] == list(dlq_jobs.CASES)
    for row in document["results"]:
        assert row["messages"] == 5_000
        assert row["msgs_per_s"] > 0, row
        if row["case"] != "read":
            assert row["result"]["phase"] == "Succeeded"
            assert row["result"]["counts"]["read"] == 5_000
    drain = next(row for row in document["results"] if row["case"] == "drain")
    assert drain["archive_bytes"] > 5_000 * 1024  # incompressible bodies
    filtered = next(r for r in document["results"] if r["case"] == "reprocess-filtered")
    assert filtered["result"]["counts"]["resent"] == 500
    assert document["brokers"] == 2
    assert not list(tmp_path.iterdir())  # the archives were removed
