"""Embedded mode end to end with Spark: ``reconsume up -f`` on a copy of examples/ runs the
cluster, configures the topic and group, runs the one-off DeadLetterJobs on local Spark and
schedules the recurring one; ``reconsume status`` shows the group's depths; edits are
reconciled (an invalid one is refused naming file, object and field); Ctrl-C stops everything.
And ``reconsume demo --fast`` tells its whole story and checks that nothing was lost."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient

from ..compat.conftest import missing
from ..polling import eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECONSUME = [sys.executable, "-m", "reconsume"]


@pytest.fixture(autouse=True)
def java() -> None:
    if shutil.which("java") is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jre-headless)")


def state_of(data: Path) -> dict[str, Any] | None:
    path = data / "state.json"
    return json.loads(path.read_text()) if path.exists() else None


def by_name(items: list[dict[str, Any]], kind: str | None = None) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in items if kind is None or i.get("kind") == kind}


def group_max_times(name_server: str, group: str) -> set[int]:
    async def read() -> set[int]:
        async with AdminClient([name_server]) as admin:
            found = set()
            for broker in await admin.brokers("orders"):
                assert broker.master is not None
                config = (await admin.group_configs(broker.master)).get(group)
                found.add(-1 if config is None else config.retry_max_times)
            return found

    return asyncio.run(read())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_up_runs_the_examples_and_reconciles_edits(tmp_path: Path) -> None:
    manifests = tmp_path / "examples"
    shutil.copytree(EXAMPLES, manifests)
    data = tmp_path / "data"
    up = subprocess.Popen(
        [*RECONSUME, "up", "-f", str(manifests), "--data-dir", str(data), "--port", "0",
         "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    servers: list[str] = []
    try:

        def applied() -> dict[str, Any] | None:
            state = state_of(data)
            if state is None:
                return None
            objects = by_name(state["objects"])
            jobs = by_name(state["jobs"])
            done = all(jobs.get(n, {}).get("phase") in ("Succeeded", "Failed")
                       for n in ("orders-dlq-replay", "orders-dlq-purge"))  # fmt: skip
            ready = all(objects.get(n, {}).get("ready") for n in ("orders", "orders-consumer"))
            return state if done and ready else None

        state = eventually(applied, 300.0, "the examples applied and the one-off jobs run")
        clusters = by_name(state["clusters"])
        assert [b["name"] for b in clusters["orders"]["brokers"]] == [
            "orders-broker-0", "orders-broker-1",
        ]  # fmt: skip
        assert clusters["legacy"]["external"] is True
        name_server = clusters["orders"]["nameServer"]
        servers = [name_server, *(b["address"] for b in clusters["orders"]["brokers"])]
        group = by_name(state["objects"])["orders-consumer"]
        assert group["status"]["groupName"] == "GID_orders"
        assert (group["status"]["retryDepth"], group["status"]["deadLetterDepth"]) == (0, 0)
        jobs = by_name(state["jobs"])
        for name in ("orders-dlq-replay", "orders-dlq-purge"):
            assert jobs[name]["phase"] == "Succeeded", jobs[name]
            assert jobs[name]["runs"] == 1
        archive = jobs["orders-dlq-archive"]  # scheduled every 30 minutes
        next_run = datetime.strptime(archive["nextRun"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert next_run.minute in (0, 30)
        assert group_max_times(name_server, "GID_orders") == {5}

        status = subprocess.run(
            [*RECONSUME, "status", "--data-dir", str(data)],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        row = next(line for line in status.stdout.splitlines() if "GID_orders" in line)
        assert re.search(
            r"orders-consumer\s+│\s+GID_orders\s+│\s+orders\s+│\s+True\s+│\s+0\s+│\s+0", row
        ), row

        # An edit: maxTimes 5 -> 7 reaches both brokers.
        group_file = manifests / "consumergroup.yaml"
        group_file.write_text(group_file.read_text().replace("maxTimes: 5", "maxTimes: 7"))
        eventually(lambda: group_max_times(name_server, "GID_orders") == {7}, 60.0, "maxTimes 7")

        # An invalid edit is refused, naming file, object and field; the brokers keep 7.
        group_file.write_text(group_file.read_text().replace("maxTimes: 7", "maxTimes: -5"))

        def refused() -> list[str]:
            state = state_of(data) or {}
            return [p for p in state.get("problems", []) if "spec.retry.maxTimes" in p]

        (problem,) = eventually(refused, 60.0, "the invalid edit reported")
        assert problem.startswith(f"{group_file}: ConsumerGroup orders-consumer: ")
        assert group_max_times(name_server, "GID_orders") == {7}
    finally:
        up.send_signal(signal.SIGINT)
        output, _ = up.communicate(timeout=120)
    assert up.returncode == 0, output
    assert "reconsume up: stopped" in output
    final = state_of(data)
    assert final is not None
    assert final["running"] is False
    for address in servers:
        host, _, port = address.rpartition(":")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5).close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_fast_tells_the_whole_story(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    result = subprocess.run(
        [*RECONSUME, "demo", "--fast", "--dir", str(directory)],
        capture_output=True, text=True, timeout=540, check=False,
        env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    counts = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*│?\s*([a-zA-Z%_ ()-]+?)\s+│\s+(\d+)\s+│", line)
        if match:
            counts[match.group(1).strip()] = int(match.group(2))
    orders, legacy, attempts_each = 16, 3, 3  # FAST: 16 orders, 3 legacy, 2 retries
    assert counts["orders produced"] == orders, counts
    assert counts["deliveries to the consumer"] >= orders * attempts_each + (orders - legacy)
    assert counts["failed deliveries"] >= orders * attempts_each
    assert counts["dead-lettered (total)"] >= orders
    assert counts["archived to Parquet"] == legacy
    assert counts["re-sent to orders"] == orders - legacy
    assert counts["paid"] == orders - legacy
    assert counts["in %DLQ%GID_order_payments"] == 0
    assert "nothing lost (paid + archived = produced)" in result.stdout
    assert "FAILED" not in result.stdout
    assert "demo passed" in result.stdout
    chart = directory / "reconsume-demo.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
