"""``reconsume operator`` as a program: it reconciles, serves /metrics and /healthz, and stops
cleanly on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ..integration.cluster import Cluster
from ..polling import eventually
from .control_plane import ControlPlane, free_ports
from .operator_support import Resources, brokers, crds, namespace, resources

__all__ = ["brokers", "crds", "namespace", "resources"]

SCRIPT = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


def test_the_command_reconciles_and_serves_metrics_and_health(
    control_plane: ControlPlane, resources: Resources, brokers: Cluster, tmp_path: Path
) -> None:
    metrics_port, liveness_port = free_ports(2)
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                SCRIPT, "operator", "--namespace", resources.namespace, "--standalone",
                "--metrics-port", str(metrics_port), "--liveness-port", str(liveness_port),
                "--drift-seconds", "2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)},
        )  # fmt: skip
    try:
        resources.create(
            "brokerclusters", "orders", {"external": {"nameServer": brokers.namesrv.address}}
        )
        resources.wait_condition("brokerclusters", "orders", "True", "Running", timeout_s=60)
        metric = 'reconsume_operator_reconcile_total{kind="BrokerCluster",result="ok"}'

        def counted() -> str | None:
            _, text = get(f"http://127.0.0.1:{metrics_port}/metrics")
            return text if metric in text else None

        body = eventually(counted, 20, "reconcile counted in /metrics")
        assert "reconsume_operator_reconcile_seconds_bucket" in body
        assert eventually(lambda: get(f"http://127.0.0.1:{liveness_port}/healthz")[0] == 200, 20)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    assert code == 0, log.read_text()[-4000:]
