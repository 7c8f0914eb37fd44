"""``reconsume demo`` on a machine without Java stops before starting anything and says what to
install; it refuses to empty a directory an earlier demo did not make."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def demo(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconsume", "demo", "--fast", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PATH": path},
    )  # fmt: skip


def test_without_java_the_demo_says_what_to_install(tmp_path: Path) -> None:
    result = demo("--dir", str(tmp_path / "demo"), path=str(Path(sys.executable).parent))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == "reconsume demo cannot run on this machine:"
    assert "Java is not installed or not on PATH" in result.stderr
    assert "openjdk-17-jre-headless" in result.stderr
    assert not (tmp_path / "demo").exists()


def test_a_directory_of_something_else_is_not_emptied(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("the demo checks for Java first")
    (tmp_path / "precious.txt").write_text("keep me")
    result = demo("--dir", str(tmp_path), path=os.environ["PATH"])
    assert result.returncode == 2
    assert "is not a demo directory" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
