"""Tools the compat tier needs. A missing tool fails the run in CI (``CI=true``) and skips
the test elsewhere, with the reason and the command that installs it."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

HERE = Path(__file__).resolve().parent
ALI_ONS_DIR = HERE / "ali_ons"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> NoReturn:
    """Fail in CI, skip locally."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a compat test may not be skipped)", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class NodeProject:
    node: str
    """The ``node`` executable."""
    directory: Path
    """The npm project (package.json, lockfile, installed node_modules)."""

    def script(self, name: str) -> Path:
        return self.directory / name


@pytest.fixture(scope="session")
def ali_ons() -> NodeProject:
    """The ali-ons driver project, with its locked dependencies installed."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian: apt-get install nodejs npm)")
    if not (ALI_ONS_DIR / "node_modules" / "ali-ons" / "package.json").is_file():
        missing(f"ali-ons is not installed in {ALI_ONS_DIR}: run `make compat-deps`")
    return NodeProject(node, ALI_ONS_DIR)
