"""Directories that outlive one test but not their module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def module_dir(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A directory for a module's servers, removed when the module is done with it.

    pytest removes a passed test's ``tmp_path`` at once (``tmp_path_retention_policy``), but
    keeps what ``tmp_path_factory`` made to the end of the run; a broker's store there holds a
    preallocated 1 GiB commit-log segment, and the run's modules together held gigabytes the
    node tier's kubelet then counted against its disk-pressure threshold.
    """
    path = factory.mktemp(name)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
