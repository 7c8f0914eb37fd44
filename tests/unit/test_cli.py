"""The command line, run as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconsume.store import MessageStore, PutRequest, StoreSettings

SCRIPT = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_crash_demo_kills_a_writer_and_recovers_every_acknowledged_message(tmp_path: Path) -> None:
    result = run("store", "crash-demo", "--rounds", "2", "--dir", str(tmp_path / "store"))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line[:5].strip().isdigit()]
    assert len(rows) == 2
    for _round, acked, verified, lost, *_rest in rows:
        assert int(acked) > 0
        assert acked == verified
        assert lost == "0"
    assert "Every acknowledged message was read back" in result.stdout


def test_store_inspect_reports_queues_as_json(tmp_path: Path) -> None:
    settings = StoreSettings(commit_log_segment_bytes=1 << 20, max_message_bytes=4096)
    with MessageStore(tmp_path, settings, background=False) as store:
        for i in range(5):
            store.put(PutRequest("orders", i % 2, b"x" * 100))
    result = run("store", "inspect", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    queues = {(q["topic"], q["queueId"]): q["max"] for q in summary["queues"]}
    assert queues == {("orders", 0): 3, ("orders", 1): 2}
    assert summary["recovery"]["cleanShutdown"] is True


def test_store_inspect_rejects_a_directory_without_a_store(tmp_path: Path) -> None:
    result = run("store", "inspect", str(tmp_path))
    assert result.returncode == 2
    assert "holds no message store" in result.stderr


def test_store_inspect_keeps_segment_files_at_their_size(tmp_path: Path) -> None:
    settings = StoreSettings(commit_log_segment_bytes=1 << 20, max_message_bytes=4096)
    with MessageStore(tmp_path, settings, background=False) as store:
        store.put(PutRequest("orders", 0, b"x"))
    assert run("store", "inspect", str(tmp_path)).returncode == 0
    sizes = {p.stat().st_size for p in (tmp_path / "commitlog").iterdir()}
    assert sizes == {1 << 20}
