"""Check that reconsume has one version: ``__version__`` of the package
(broker_image/reconsume/__init__.py) is the distribution's version (pyproject.toml reads it),
the tag ``tools/build_images.py`` gives the three images, and the Helm chart's ``version`` and
``appVersion`` (charts/reconsume/Chart.yaml), which is the tag the chart and the operator's
default images name. ``make lint`` runs it:

    python tools/check_version.py          # exit 1, naming what differs, when they disagree

To release another version, change ``__version__`` and both fields of Chart.yaml.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

# PyYAML ships without type information; types-PyYAML may or may not be installed.
import yaml  # type: ignore[import-untyped, unused-ignore]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_INIT = ROOT / "broker_image" / "reconsume" / "__init__.py"
CHART = ROOT / "charts" / "reconsume" / "Chart.yaml"
_VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']\s*$""", re.MULTILINE)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def package_version(init: Path = PACKAGE_INIT) -> str:
    """``__version__`` of the package, read from its source (nothing is imported)."""
    match = _VERSION_LINE.search(init.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"{_shown(init)} sets no __version__")
    return match.group(1)


def chart_versions(chart: Path = CHART) -> dict[str, str]:
    """The chart's ``version`` and ``appVersion``, as strings."""
    document = yaml.safe_load(chart.read_text(encoding="utf-8")) or {}
    return {key: str(document.get(key, "")) for key in ("version", "appVersion")}


def problems(init: Path = PACKAGE_INIT, chart: Path = CHART) -> list[str]:
    """What disagrees with the package's version, one sentence each."""
    version = package_version(init)
    found = []
    for key, value in chart_versions(chart).items():
        if value != version:
            found.append(
                f"{_shown(chart)}: {key} is {value!r}, but the package's __version__ "
                f"({_shown(init)}) is {version!r}"
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    del argv  # no options
    found = problems()
    for problem in found:
        print(f"check_version: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
