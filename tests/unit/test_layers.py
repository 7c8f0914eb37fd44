"""The import-linter contracts must name every package of reconsume, or a new package could
break the layering unnoticed."""

from __future__ import annotations

import configparser
from pathlib import Path

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
