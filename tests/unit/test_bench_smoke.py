"""The benchmarks still run: ``python -m bench.run --quick`` in a subprocess, as `make bench`
runs the full one (the client scenario starts a real name server, brokers and client
processes; the rocketmq one also Apache RocketMQ's, and the Java load generator, building
bench/java with Maven first if needed, or says why it skipped). Tiny sizes, so this checks
that the code works, never how fast it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(660)
def test_quick_benchmark_run_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = tmp_path / "RESULTS.md"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--out", str(out), "--write", str(report)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # about 1.5 min; a first Maven build of bench/java downloads its jars
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["quick"] is True
    assert run["scenarios"] == ["append", "read", "recovery", "client", "rocketmq"]
    for name in ("store_append", "store_read", "store_recovery"):
        document = json.loads((out / f"{name}.json").read_text())
        assert document["scenario"] == name
        assert document["results"], name
        for row in document["results"]:
            assert row.get("msgs_per_s", 1) > 0
    recovery = json.loads((out / "store_recovery.json").read_text())
    for row in recovery["results"]:
        assert row["end_offset"] == recovery["log_bytes"]
    client = json.loads((out / "client_throughput.json").read_text())
    assert client["scenario"] == "client_throughput"
    assert [(r["flush_mode"], r["producers"]) for r in client["produce"]] == [
        ("Sync", 1),
        ("Sync", 4),
        ("Async", 1),
        ("Async", 4),
    ]
    for row in client["produce"] + client["consume"]:
        assert row["msgs_per_s"] > 0
    assert all(r["messages"] >= 500 for r in client["consume"][0]["runs"])
    versus = json.loads((out / "compare_rocketmq.json").read_text())
    text = report.read_text()
    if versus.get("skipped"):  # no java, or no mvn and bench/java not built
        assert f"**Skipped**: {versus['skipped'].splitlines()[0]}" in text
    else:
        systems = [(r["system"], r["flush_mode"]) for r in versus["runs"]]
        assert systems == [("reconsume", "Async"), ("rocketmq", "Async")]
        for entry in versus["runs"]:
            cases = entry["cases"]
            for case in ("produce-1", "produce-8", "consume", "retry"):
                assert cases[case]["msgs_per_s"] > 0, (entry["system"], case)
                assert cases[case]["client_cpu_seconds"] > 0, (entry["system"], case)
            assert cases["lateness"]["all"]["count"] == cases["lateness"]["messages"]
        assert "| produce, 8 threads: msg/s |" in text
        assert "| consume: client CPU µs/msg |" in text
    assert "## Append throughput" in text
    assert "### Consume" in text
    assert not (out / "data").exists() or not any((out / "data").iterdir())
