"""The access-control benchmark still runs: ``python -m bench.compare_rocketmq --acl --quick``
(reconsume, then Apache RocketMQ 5.3.2, each with access control off and then on, driven by the
Java load generator, signing with it on) in a subprocess. Without java (or without mvn and a
built bench/java) it says why it skipped. Tiny sizes: this checks that the code works and that
the signed runs are signed, never how fast they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.acl_report import cost_per_message
from bench.compare_acl import ADMIN, CLIENT, acl_toml, plain_acl_yml

ROOT = Path(__file__).resolve().parents[2]


def test_both_acl_files_hold_the_same_accounts_and_no_whitelist() -> None:
    yml, toml = plain_acl_yml(), acl_toml()
    for text in (yml, toml):
        assert ADMIN[0] in text
        assert CLIENT[1] in text
        assert "BenchProduce" in text
        assert "bench-consume" in text
    assert "globalWhiteRemoteAddresses: []" in yml
    assert "global_white_remote_addresses = []" in toml
    assert "whiteRemoteAddress" not in yml  # 127.0.0.1 would pass unsigned


def test_cost_per_message_is_the_difference_of_the_times_per_message() -> None:
    assert cost_per_message(10_000.0, 8_000.0) == pytest.approx(25.0)
    assert cost_per_message(None, 8_000.0) is None
    assert cost_per_message(10_000.0, 0.0) is None


@pytest.mark.slow
@pytest.mark.timeout(540)
def test_acl_off_and_on_side_by_side_writes_its_json_and_section(tmp_path: Path) -> None:
    out, data = tmp_path / "out", tmp_path / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "bench.compare_rocketmq", "--acl", "--quick", "--out", str(out),
         "--data-dir", str(data)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=500, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    document: dict[str, Any] = json.loads((out / "compare_rocketmq_acl.json").read_text())
    text = (out / "compare_rocketmq_acl.md").read_text()
    assert document["scenario"] == "compare_rocketmq_acl"
    if document.get("skipped"):
        assert f"**Skipped**: {document['skipped'].splitlines()[0]}" in text
    else:
        runs = [(r["system"], r["acl"]) for r in document["runs"]]
        assert runs == [
            ("reconsume", False), ("reconsume", True), ("rocketmq", False), ("rocketmq", True),
        ]  # fmt: skip
        assert document["versions"]["rocketmq"] == "5.3.2"
        for entry in document["runs"]:
            cases = entry["cases"]
            for case in ("produce-1", "produce-8", "consume"):
                assert cases[case]["msgs_per_s"] > 0, (entry["system"], entry["acl"], case)
            for case in ("produce-1", "produce-8"):
                assert cases[case]["not_ok"] == cases[case]["errors"] == 0
            assert entry["unsigned_send_refused"] == entry["acl"]  # the check is in force
            expected = ("admin", "client") if entry["acl"] else (None, None)
            assert (cases["setup"]["account"], cases["consume"]["account"]) == expected
        assert "| **produce, 8 threads: msg/s** |" in text
        assert "aclEnable=true" in text
        assert CLIENT[1] not in text  # secrets masked in the report
    assert not any(data.iterdir())  # the stores were removed
