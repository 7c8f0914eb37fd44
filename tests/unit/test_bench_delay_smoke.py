"""The delay-lateness benchmark still runs: ``python -m bench.delay_lateness`` with tiny sizes in
a subprocess (it starts a real name server and broker). Checks that it works and cleans up,
never how fast it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_delay_lateness_benchmark_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "delay.json"
    data = tmp_path / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [
            sys.executable, "-m", "bench.delay_lateness", "--messages", "200", "--rate", "2000",
            "--retry-messages", "100", "--write-json", str(out), "--data-dir", str(data),
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
