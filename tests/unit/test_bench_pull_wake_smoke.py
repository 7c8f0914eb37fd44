"""The waiting-consumer benchmark still runs: ``python -m bench.pull_wake`` with a few messages
in a subprocess (it starts a real name server and broker per flush mode). Checks that it works,
that every send woke a held pull and that it cleans up, never how fast it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pull_wake_benchmark_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "wake.json"
    data = tmp_path / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [
            sys.executable, "-m", "bench.pull_wake", "--messages", "20",
            "--write-json", str(out), "--data-dir", str(data),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(out.read_text())
    assert document["scenario"] == "pull_wake"
    assert set(document["flush"]) == {"Sync", "Async"}
    for mode in document["flush"].values():
        assert mode["ack_ms"]["count"] == mode["seen_ms"]["count"] == 20
        assert mode["pulls_woken"] == 21  # the warm-up send too
        assert 0 < mode["seen_ms"]["p50"] <= mode["seen_ms"]["max"]
    assert not any(data.iterdir())  # the stores were removed
