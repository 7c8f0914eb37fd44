"""The import-linter contracts must name every package of reconsume, or a new package could
break the layering unnoticed."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_in_a_layer_contract() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    named: set[str] = set()
    for section in config.sections():
        for key in ("layers", "source_modules", "forbidden_modules"):
            for line in config[section].get(key, "").splitlines():
                for part in line.split("|"):
                    named.add(part.strip().strip("()"))
    packages = {
        f"reconsume.{path.parent.name}"
        for path in (ROOT / "broker_image" / "reconsume").glob("*/__init__.py")
    }
    assert packages, "no packages found"
    missing = sorted(packages - named)
    assert not missing, f"add these packages to .importlinter: {missing}"


def test_no_import_package_is_named_operator() -> None:
    for base in ("broker_image", "operator"):
        for init in (ROOT / base).rglob("__init__.py"):
            assert init.parent.name != "operator", f"{init.parent} shadows the stdlib"


# ------------------------------------------------------------------ the contracts can fail
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
"""Where import-linter is installed. The check runs on a copy of the packages with ``python
-S``: without ``site``, the editable install's finder (which would import the working tree
instead of the copy) is never installed."""
FORBIDDEN = [
    pytest.param(
        "reconsume/store/_probe.py", "from reconsume.client import admin", id="store-client"
    ),
    pytest.param(
        "reconsume/engine/_probe.py", "from reconsume.topology import plan", id="engine-topology"
    ),
    pytest.param(
        "reconsume/client/_probe.py", "from reconsume.engine import retry", id="client-engine"
    ),
    pytest.param(
        "reconsume_operator/_probe.py", "from reconsume.broker import server", id="operator-broker"
    ),
    pytest.param("reconsume/wire/_probe.py", "import yaml", id="wire-yaml"),
    pytest.param("reconsume/topology/_probe.py", "import kopf", id="topology-kopf"),
]


def lint_imports(packages: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-S", "-c",
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())",
        "--config", str(ROOT / ".importlinter"), "--no-cache",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{packages}{os.pathsep}{SITE_PACKAGES}"}
    return subprocess.run(
        command, cwd=packages, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(ROOT / "broker_image" / "reconsume", root / "reconsume")
    shutil.copytree(ROOT / "operator" / "reconsume_operator", root / "reconsume_operator")
    return root


def test_the_layer_check_runs_in_make_lint() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "lint-imports" in recipe


def test_the_packages_as_they_are_keep_every_contract(packages: Path) -> None:
    result = lint_imports(packages)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line"), FORBIDDEN)
def test_a_forbidden_import_breaks_a_contract(packages: Path, module: str, line: str) -> None:
    probe = packages / module
    probe.write_text(f'"""An import no layer allows."""\n\n{line}\n')
    try:
        result = lint_imports(packages)
    finally:
        probe.unlink()
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout
    assert probe.stem in result.stdout, result.stdout
