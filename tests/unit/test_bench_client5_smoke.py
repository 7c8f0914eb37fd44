"""The RocketMQ 5 client benchmark still runs: ``python -m bench.compare_client5 --quick``
(reconsume's broker with ``--grpc-listen``, then Apache RocketMQ 5.3.3's broker and proxy, driven
by the load generator on rocketmq-client-java) in a subprocess. Without java (or without mvn and
a built bench/java) it says why it skipped. Tiny sizes: this checks that the code works and that
every command did what it says, never how fast it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.client5_report import goals
from bench.compare_client5 import Client5Sizes, commands, proxy_settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_proxy_allows_the_redelivery_invisible_duration() -> None:
    for sizes in (Client5Sizes.full(), Client5Sizes.quick()):
        assert proxy_settings(sizes) == {"minInvisibleTimeMillsForRecv": sizes.invisible_ms}
        assert sizes.invisible_ms >= 1000  # reconsume's least
        redelivery = dict(commands(sizes))["redelivery"]
        assert redelivery[redelivery.index("--invisible-ms") + 1] == str(sizes.invisible_ms)


def test_commands_run_in_the_same_order_for_both_systems() -> None:
    cases = [case for case, _ in commands(Client5Sizes.full())]
    assert cases == [
        "warmup", "warmup-drain", "produce-1", "produce-8", "fill", "consume-simple",
        "consume-push", "redelivery",
    ]  # fmt: skip


def test_goals_compare_msgs_per_s_and_the_lateness_p99() -> None:
    def cases(rate: float, p99: float) -> dict[str, Any]:
        found: dict[str, Any] = {"redelivery": {"lateness_ms": {"p99": p99}}}
        for case in ("produce-1", "produce-8", "consume-simple", "consume-push"):
            found[case] = {"msgs_per_s": rate}
        return found

    document = {
        "runs": [
            {"system": "reconsume", "cases": cases(1_000.0, 4.0)},
            {"system": "rocketmq", "cases": cases(800.0, 900.0)},
        ]
    }
    text = "\n".join(goals(document))
    assert text.count("| 1.25 | met |") == 4
    assert "| 4.00 ms | met |" in text
    document["runs"][0]["cases"] = cases(700.0, 6.0)
    text = "\n".join(goals(document))
    assert text.count("| 0.88 | **missed** |") == 4
    assert "| 6.00 ms | **missed** |" in text


@pytest.mark.slow
@pytest.mark.timeout(540)
def test_client5_side_by_side_writes_its_json_and_section(tmp_path: Path) -> None:
    out, data = tmp_path / "out", tmp_path / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "bench.compare_client5", "--quick", "--out", str(out),
         "--data-dir", str(data)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=500, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    document: dict[str, Any] = json.loads((out / "compare_client5.json").read_text())
    text = (out / "compare_client5.md").read_text()
    assert document["scenario"] == "compare_client5"
    if document.get("skipped"):
        assert f"**Skipped**: {document['skipped'].splitlines()[0]}" in text
    else:
        assert [r["system"] for r in document["runs"]] == ["reconsume", "rocketmq"]
        assert document["versions"]["client"] == "5.2.0"
        sizes = Client5Sizes.quick()
        for entry in document["runs"]:
            cases = entry["cases"]
            for case in ("produce-1", "produce-8", "consume-simple", "consume-push"):
                assert cases[case]["msgs_per_s"] > 0, (entry["system"], case)
                assert "loadavg_start" in cases[case]
                assert cases[case]["server_cpu_seconds"] >= 0
            for case in ("produce-1", "produce-8"):
                assert cases[case]["errors"] == 0, (entry["system"], cases[case]["last_error"])
            assert cases["consume-simple"]["acked"] >= sizes.consume_messages
            redelivery = cases["redelivery"]
            assert redelivery["invisible_ms"] == sizes.invisible_ms
            assert redelivery["lateness_ms"]["count"] == redelivery["messages"] > 0
            assert redelivery["attempt_mismatches"] == 0  # the second delivery is attempt 2
            # the invisible duration was honoured: never back more than 50 ms early
            assert redelivery["lateness_ms"]["min"] > -50
        processes = [set(r["cases"]["produce-1"]) for r in document["runs"]]
        assert "proxy_cpu_seconds" not in processes[0]
        assert "proxy_cpu_seconds" in processes[1]
        assert "| **produce, 8 threads: msg/s** |" in text
        assert "| **redelivery lateness p99 ms** |" in text
        assert "minInvisibleTimeMillsForRecv" in text
        assert "--grpc-listen 127.0.0.1:0" in text
    assert not any(data.iterdir())  # the stores were removed
