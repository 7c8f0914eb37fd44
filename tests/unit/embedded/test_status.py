"""``reconsume status`` on a data directory: what a state file says, and clear errors when
there is none or it is not one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from reconsume.embedded import status

STATE = {
    "running": False, "pid": 1, "dataDir": "/d", "syncedAt": None, "problems": ["p: x"],
    "clusters": [{"name": "shop", "external": False, "nameServer": "127.0.0.1:9876",
                  "problem": None, "brokers": [{"name": "shop-broker-0",
                                                "address": "127.0.0.1:1", "running": True}]}],
    "objects": [{"kind": "ConsumerGroup", "name": "payments", "cluster": "shop", "ready": True,
                 "reason": "Reconciled", "message": "", "deleting": False,
                 "status": {"groupName": "GID_payments", "retryDepth": 3, "deadLetterDepth": 7}}],
    "jobs": [{"name": "replay", "phase": "Succeeded", "runs": 1, "counts": {"resent": 7}}],
}  # fmt: skip


def test_the_state_is_shown(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps(STATE))
    out = io.StringIO()
    assert status.main(tmp_path, out) == 0
    text = out.getvalue()
    assert "not running (last state shown)" in text
    row = next(line for line in text.splitlines() if "GID_payments" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")][:6] == [
        "payments", "GID_payments", "shop", "True", "3", "7",
    ]  # fmt: skip
    assert "resent 7" in text
    assert "problem: p: x" in text


def test_a_namespace_column_appears_once_anything_is_outside_default(tmp_path: Path) -> None:
    shop = {**STATE["objects"][0], "namespace": "shop", "status": {"groupName": "GID_shop"}}
    state = {**STATE, "objects": [*STATE["objects"], shop]}
    (tmp_path / "state.json").write_text(json.dumps(state))
    out = io.StringIO()
    assert status.main(tmp_path, out) == 0
    rows = [[c.strip() for c in line.strip("│ ").split("│")]
            for line in out.getvalue().splitlines() if "GID_" in line]  # fmt: skip
    assert [row[:3] for row in rows] == [
        ["default", "payments", "GID_payments"], ["shop", "payments", "GID_shop"],
    ]  # fmt: skip


def test_no_state_and_a_foreign_file_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status.main(tmp_path, io.StringIO()) == 1
    assert capsys.readouterr().err == (
        f"reconsume status: no reconsume up has run with data directory {tmp_path}\n"
    )
    (tmp_path / "state.json").write_text("{not json")
    assert status.main(tmp_path, io.StringIO()) == 1
    assert "is not a state file of reconsume up" in capsys.readouterr().err


def test_with_replicas_each_broker_process_is_a_line_saying_if_it_is_master(tmp_path: Path) -> None:
    def process(
        name: str, broker: str, port: int, master: bool, running: bool = True
    ) -> dict[str, object]:
        return {"name": name, "broker": broker, "address": f"127.0.0.1:{port}",
                "master": master, "running": running}  # fmt: skip

    cluster = {**STATE["clusters"][0], "replicas": 2, "brokers": [
        process("shop-broker-0", "shop-broker-0", 1, False, running=False),
        process("shop-broker-r1-0", "shop-broker-0", 2, True),
        process("shop-broker-1", "shop-broker-1", 3, True),
        process("shop-broker-r1-1", "shop-broker-1", 4, False),
    ]}  # fmt: skip
    (tmp_path / "state.json").write_text(json.dumps({**STATE, "clusters": [cluster]}))
    out = io.StringIO()
    assert status.main(tmp_path, out) == 0
    cells = [line.split("│")[3].strip() for line in out.getvalue().splitlines()
             if "127.0.0.1:" in line and line.count("│") == 5]  # fmt: skip
    assert cells == [
        "shop-broker-0 127.0.0.1:1 (replica, down)", "shop-broker-r1-0 127.0.0.1:2 (master)",
        "shop-broker-1 127.0.0.1:3 (master)", "shop-broker-r1-1 127.0.0.1:4 (replica)",
    ]  # fmt: skip
