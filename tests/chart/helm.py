"""helm for the chart tests: found as ``$HELM`` (the Makefile exports it), ``helm`` on the
PATH, or the build ``make chart-deps`` caches (``~/.cache/reconsume/bin/helm-<version>``, the
version the Makefile pins); and ``render``, which runs ``helm template`` and parses what it
prints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "reconsume"
VALUES = Path(__file__).with_name("values")
"""The matrix of values files the chart is linted, rendered and applied with."""
MONITORING_APIS = (
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PodMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
)
"""What prometheus-operator serves (``helm template --api-versions``)."""
RELEASE = "reconsume"
NAMESPACE = "reconsume-system"


def pinned_version() -> str:
    """``HELM_VERSION`` of the Makefile."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^HELM_VERSION\s*:=\s*(\S+)", text, re.MULTILINE)
    assert match, "the Makefile pins no HELM_VERSION"
    return match.group(1)


def find_helm() -> Path | None:
    candidates = [
        os.environ.get("HELM"),
        shutil.which("helm"),
        str(Path.home() / ".cache" / "reconsume" / "bin" / f"helm-{pinned_version()}"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def require_helm(missing: Callable[[str], NoReturn]) -> Helm:
    """The helm found, or ``missing`` (the tier's fail-in-CI, skip-elsewhere) with the fix."""
    found = find_helm()
    if found is None:
        missing(f"helm is not built: run `make chart-deps` (go install helm {pinned_version()})")
    return Helm(found)


class HelmError(AssertionError):
    """helm exited with an error; the message is what it printed."""


class Helm:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run(self, *args: str, timeout_s: float = 60) -> str:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "HELM_CACHE_HOME": "/tmp/reconsume-helm/cache",
                 "HELM_CONFIG_HOME": "/tmp/reconsume-helm/config",
                 "HELM_DATA_HOME": "/tmp/reconsume-helm/data"},
        )  # fmt: skip
        if done.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return done.stdout

    def template_text(
        self,
        *,
        values: Iterable[Path] = (),
        sets: Iterable[str] = (),
        api_versions: Iterable[str] = (),
        extra: Iterable[str] = (),
        release: str = RELEASE,
        namespace: str = NAMESPACE,
    ) -> str:
        args = ["template", release, str(CHART), "--namespace", namespace]
        for path in values:
            args += ["--values", str(path)]
        for assignment in sets:
            args += ["--set", assignment]
        for api in api_versions:
            args += ["--api-versions", api]
        return self.run(*args, *extra)

    def render(self, **kwargs: Any) -> list[dict[str, Any]]:
        """The objects ``helm template`` renders (empty documents dropped)."""
        return [doc for doc in yaml.safe_load_all(self.template_text(**kwargs)) if doc]


def values_files() -> list[Path]:
    return sorted(VALUES.glob("*.yaml"))


def by_kind(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"{len(found)} objects of kind {kind}"
    return found[0]
