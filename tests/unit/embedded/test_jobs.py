"""Embedded mode's DeadLetterJob runs, without Spark: when a run is due (once per spec, or on
the cron schedule), what a run's command is, what stops one from starting, and what survives a
restart."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconsume.embedded import jobs
from reconsume.embedded.jobs import (
    FAILED,
    PENDING,
    JobRunner,
    JobState,
    command_arguments,
    master_problem,
)
from reconsume.embedded.manifests import Manifest, Source
from reconsume.topology.jobs import Source as JobSource
from reconsume.topology.jobs import job_spec

NOW = datetime(2026, 11, 21, 10, 7, tzinfo=UTC)


def job(name: str = "replay", **spec: Any) -> Manifest:
    body = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "DeadLetterJob",
        "metadata": {"name": name},
        "spec": {"consumerGroup": "orders-consumer", "action": "Reprocess", **spec},
    }
    return Manifest(Source(Path("job.yaml")), body)


def unresolved(manifest: Manifest) -> str:
    return "spec.consumerGroup: ConsumerGroup orders-consumer is not declared in the manifests"


def resolved(manifest: Manifest) -> JobSource:
    return JobSource("127.0.0.1:9876", "GID_orders")


K8S = {"master": "k8s://https://kubernetes.default.svc"}
"""A master embedded mode cannot run: every run of a job with it fails at once, without Spark."""


def sync(runner: JobRunner, *manifests: Manifest, now: datetime = NOW) -> None:
    asyncio.run(runner.sync({m.key: m for m in manifests}, now))


@pytest.fixture
def quick_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs are real processes that exit at once (``reconsume dlq --help``), Java or not."""
    monkeypatch.setattr(jobs, "java_problem", lambda: None)
    monkeypatch.setattr(jobs, "command_arguments", lambda spec, source: ["--help"])


def test_a_one_off_job_runs_once_per_spec(tmp_path: Path) -> None:
    runner = JobRunner(tmp_path, resolved)
    manifest = job(spark=K8S)
    sync(runner, manifest)
    state = runner.states[manifest.key]
    assert (state.phase, state.runs) == (FAILED, 1)
    assert state.message.startswith("spec.spark.master: k8s://")
    sync(runner, manifest)
    assert runner.states[manifest.key].runs == 1  # the same spec is not run again
    sync(runner, job(spark=K8S, ratePerSecond=5))
    assert runner.states[manifest.key].runs == 2  # a changed spec is a new run
    # A restart reads what ran.
    again = JobRunner(tmp_path, resolved)
    sync(again, job(spark=K8S, ratePerSecond=5))
    assert again.states[manifest.key].runs == 2


@pytest.mark.usefixtures("quick_runs")
def test_a_job_whose_group_is_unknown_waits_for_it_across_restarts(tmp_path: Path) -> None:
    manifest = job()
    runner = JobRunner(tmp_path, unresolved)
    sync(runner, manifest)
    sync(runner, manifest)
    state = runner.states[manifest.key]
    assert (state.phase, state.runs) == (PENDING, 0)
    assert state.message == f"cannot start yet: {unresolved(manifest)}"
    # Still due after a restart; starts once the group resolves.
    again = JobRunner(tmp_path, resolved)

    async def scenario() -> JobState:
        await again.sync({manifest.key: manifest}, NOW)
        started = again.states[manifest.key]
        assert started.child is not None
        await started.child.wait()
        await again.sync({manifest.key: manifest}, NOW)
        return started

    state = asyncio.run(scenario())
    assert (state.phase, state.runs) == (FAILED, 1)  # `dlq --help` writes no result
    sync(again, manifest)
    assert again.states[manifest.key].runs == 1


def test_a_scheduled_job_waits_for_its_time(tmp_path: Path) -> None:
    runner = JobRunner(tmp_path, resolved)
    manifest = job(
        "archive", action="Drain", sink={"path": "/tmp/x"}, schedule="*/30 * * * *", spark=K8S
    )
    sync(runner, manifest)
    state = runner.states[manifest.key]
    assert (state.phase, state.runs, state.next_run) == (PENDING, 0, "2026-11-21T10:30:00Z")
    sync(runner, manifest, now=datetime(2026, 11, 21, 10, 29, 59, tzinfo=UTC))
    assert state.runs == 0
    sync(runner, manifest, now=datetime(2026, 11, 21, 10, 30, 1, tzinfo=UTC))
    assert state.runs == 1
    assert state.last_schedule_time == "2026-11-21T10:30:01Z"
    assert state.next_run == "2026-11-21T11:00:00Z"
    sync(runner, manifest, now=datetime(2026, 11, 21, 10, 31, tzinfo=UTC))
    assert (state.runs, state.next_run) == (1, "2026-11-21T11:00:00Z")


def test_masters_that_cannot_run_here_are_refused(tmp_path: Path) -> None:
    assert master_problem("local[*]") is None
    assert master_problem("local") is None
    assert master_problem("spark://10.0.0.1:7077") is None
    problem = master_problem("k8s://https://kubernetes.default.svc")
    assert problem is not None
    assert problem.startswith("spec.spark.master: k8s://")

    runner = JobRunner(tmp_path, resolved)
    manifest = job(spark=K8S)
    sync(runner, manifest)
    state = runner.states[manifest.key]
    assert state.phase == FAILED
    assert state.message.startswith("spec.spark.master: k8s://")


def test_the_command_is_the_operators_with_local_spark_settings() -> None:
    manifest = job(filter="tags = 'paid'", target={"topic": "orders"}, ratePerSecond=10,
                   spark={"master": "local[2]", "driver": {"memory": "2g"},
                          "conf": {"spark.sql.shuffle.partitions": "2"}})  # fmt: skip
    arguments = command_arguments(job_spec(manifest.body), JobSource("127.0.0.1:9876", "GID_o"))
    assert arguments == [
        "reprocess", "--name-server", "127.0.0.1:9876", "--group", "GID_o",
        "--job", "default/replay", "--filter", "tags = 'paid'", "--target-topic", "orders",
        "--rate-per-second", "10", "--master", "local[2]",
        "--conf", "spark.driver.cores=1", "--conf", "spark.driver.memory=2g",
        "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip


def test_a_run_interrupted_by_a_stop_is_failed_after_a_restart(tmp_path: Path) -> None:
    (tmp_path / "jobs.json").write_text(
        '[{"kind": "DeadLetterJob", "namespace": "default", "name": "replay", '
        '"phase": "Running", "runs": 1, "fingerprint": "x"}]'
    )
    runner = JobRunner(tmp_path, unresolved)
    state = runner.states[("DeadLetterJob", "default", "replay")]
    assert state.phase == FAILED
    assert state.message == "interrupted: reconsume up stopped during the run"


def test_a_spark_master_gets_the_executors_the_operator_would_ask_for() -> None:
    manifest = job(spark={"master": "spark://10.0.0.1:7077", "executor": {"instances": 3}})
    arguments = command_arguments(job_spec(manifest.body), JobSource("127.0.0.1:9876", "GID_o"))
    conf = [arguments[i + 1] for i, a in enumerate(arguments) if a == "--conf"]
    assert conf == [
        "spark.driver.cores=1", "spark.driver.memory=1g", "spark.executor.instances=3",
        "spark.executor.cores=1", "spark.executor.memory=1g", "spark.cores.max=3",
    ]  # fmt: skip


@pytest.mark.usefixtures("quick_runs")
def test_overlapping_passes_do_not_take_a_starting_run_for_an_exited_one(tmp_path: Path) -> None:
    """Two passes at once (``reconsume up``'s loop and a caller's own sync): the second must not
    look at a run the first is still spawning."""
    runner = JobRunner(tmp_path, resolved)
    manifest = job()
    wanted = {manifest.key: manifest}

    async def scenario() -> JobState:
        await asyncio.gather(runner.sync(wanted, NOW), runner.sync(wanted, NOW))
        state = runner.states[manifest.key]
        assert state.child is not None
        await state.child.wait()
        await runner.sync(wanted, NOW)
        return state

    state = asyncio.run(scenario())
    assert (state.phase, state.runs) == (FAILED, 1)
    assert state.message.startswith("exited with 0 without a result")
