"""The chart tier's tools: helm (``make chart-deps`` builds it) and promtool (Debian's
prometheus). A missing one fails the run in CI and skips the tests elsewhere."""

from __future__ import annotations

import shutil

import pytest

from ..compat.conftest import missing
from .helm import Helm, require_helm


@pytest.fixture(scope="session")
def helm() -> Helm:
    return require_helm(missing)


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing(
            "promtool is not installed (Debian: apt-get install prometheus; or `make chart-deps`)"
        )
    return path
