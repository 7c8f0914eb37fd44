"""The delay-lateness and waiting-consumer benchmarks still run: ``python -m bench.delay_lateness``
and ``python -m bench.pull_wake`` with tiny sizes in a subprocess (each starts a real name server
and broker). Checks that they work and clean up, never how fast they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _bench(module: str, tmp_path: Path, *args: str) -> tuple[Any, Path]:
    """Run ``python -m module args``; returns its JSON and the data directory it used."""
    out = tmp_path / "out.json"
    data = tmp_path / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", module, *args, "--write-json", str(out), "--data-dir", str(data)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text()), data


def test_delay_lateness_benchmark_writes_its_json(tmp_path: Path) -> None:
    document, data = _bench(
        "bench.delay_lateness", tmp_path,
        "--messages", "200", "--rate", "2000", "--retry-messages", "100",
    )  # fmt: skip
    assert document["scenario"] == "delay_lateness"
    for kind in ("broker_ms", "end_to_end_ms"):
        lateness = document["lateness"][kind]
        assert lateness["all"]["count"] == 200
        assert lateness["level"]["count"] == lateness["timer"]["count"] == 100
        assert lateness["all"]["min"] >= 0  # never early
    assert [r["case"] for r in document["retry"]] == ["levels", "timer"]
    for row in document["retry"]:
        assert row["deliveries"] >= 2 * row["messages"] == 200
        assert row["msgs_per_s"] > 0
    assert not any(data.iterdir())  # the store was removed


def test_pull_wake_benchmark_writes_its_json(tmp_path: Path) -> None:
    document, data = _bench("bench.pull_wake", tmp_path, "--messages", "20")
    assert document["scenario"] == "pull_wake"
    assert set(document["flush"]) == {"Sync", "Async"}
    for mode in document["flush"].values():
        assert mode["ack_ms"]["count"] == mode["seen_ms"]["count"] == 20
        assert mode["pulls_woken"] == 21  # the warm-up send too: every send woke a held pull
        assert 0 < mode["seen_ms"]["p50"] <= mode["seen_ms"]["max"]
    assert not any(data.iterdir())  # the stores were removed
