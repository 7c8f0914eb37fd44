"""The replication benchmarks still run: ``python -m bench.compare_rocketmq --replication
--quick`` (a reconsume master and Sync replica, then Apache RocketMQ's SYNC_MASTER and SLAVE,
driven by the Java load generator) and ``python -m bench.failover --kills 1`` against reconsume
and Apache RocketMQ's controller mode, each in a subprocess. Without java (or without mvn and
a built bench/java) the RocketMQ parts say why they skipped. Tiny sizes: this checks that the
code works, never how fast it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench(module: str, *args: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,  # about 1 min each; a first Maven build of bench/java downloads its jars
        check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]


@pytest.mark.slow
@pytest.mark.timeout(540)
def test_replicated_side_by_side_writes_its_json_and_section(tmp_path: Path) -> None:
    out, data = tmp_path / "out", tmp_path / "data"
    _bench(
        "bench.compare_rocketmq", "--replication", "--quick", "--out", str(out),
        "--data-dir", str(data),
    )  # fmt: skip
    document: dict[str, Any] = json.loads((out / "compare_rocketmq_replication.json").read_text())
    text = (out / "compare_rocketmq_replication.md").read_text()
    assert document["scenario"] == "compare_rocketmq_replication"
    if document.get("skipped"):
        assert f"**Skipped**: {document['skipped'].splitlines()[0]}" in text
    else:
        systems = [(r["system"], r["flush_mode"], r["replication"]) for r in document["runs"]]
        assert systems == [("reconsume", "Async", True), ("rocketmq", "Async", True)]
        for entry in document["runs"]:
            cases = entry["cases"]
            assert cases["setup"]["replicas"] == 2
            for case in ("produce-1", "produce-8", "consume", "retry"):
                assert cases[case]["msgs_per_s"] > 0, (entry["system"], case)
                assert "replica_cpu_seconds" in cases[case]
                assert cases[case]["client_cpu_seconds"] > 0, (entry["system"], case)
            for case in ("produce-1", "produce-8"):
                assert cases[case]["not_ok"] == cases[case]["errors"] == 0
        assert "| **produce, 8 threads: msg/s** |" in text
        assert "| produce, 8 threads: client CPU µs/msg |" in text
        assert "brokerRole=SYNC_MASTER" in text
        assert "inSyncReplicas=2" in text
    assert not any(data.iterdir())  # the stores were removed


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(540)
def test_failover_against_both_systems_writes_its_json(tmp_path: Path) -> None:
    out, data = tmp_path / "failover.json", tmp_path / "data"
    _bench(
        "bench.failover", "--kills", "1", "--lease-ms", "3000", "--systems",
        "reconsume,rocketmq", "--write-json", str(out), "--data-dir", str(data),
    )  # fmt: skip
    results = json.loads(out.read_text())["results"]
    assert [r["system"] for r in results] == ["reconsume", "rocketmq"]
    for result in results:
        if result.get("skipped"):
            continue
        assert result["signal"] == "KILL"
        assert result["failover_s"]["count"] == 1
        assert result["failover_s"]["max"] > 0
        assert result["acked"] == 20 + 10 + 1  # warm-up, one round, the send after the kill
        assert len(result["lost_per_store"]) == 3  # every broker looked at
    assert not any(results[0]["lost_per_store"].values())  # reconsume's Sync replication
    assert not any(data.iterdir())  # the stores were removed
