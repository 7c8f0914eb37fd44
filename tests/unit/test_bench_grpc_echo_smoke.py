"""The gRPC server benchmark still runs: ``python -m bench.grpc_echo`` with tiny sizes in a
subprocess (each round starts a grpcio server and the broker's own in processes of their own).
Checks that both answer and are measured, never how fast they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_grpc_echo_benchmark_measures_both_servers() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "bench.grpc_echo", "--threads", "2", "--seconds", "0.3",
         "--rounds", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in ("grpcio", "reconsume"):
        assert result["median"][kind]["calls_per_s"] > 0
        assert result["median"][kind]["server_cpu_us_per_call"] >= 0
