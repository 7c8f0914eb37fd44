"""One version: ``reconsume.__version__`` is the distribution's version, the default tag of the
images ``tools/build_images.py`` builds, the Helm chart's version and appVersion, and so the tag
of the operator's default images, which therefore exist once ``make images`` has run;
``tools/check_version.py`` (``make lint``) fails when the chart disagrees."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import reconsume
from reconsume.cli import main as cli_main
from reconsume_operator.config import OperatorConfig

from .tool_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "reconsume" / "Chart.yaml"
TOOLS = ROOT / "tools"


check_version = load_script("check_version")
build_images = load_script("build_images")


def chart() -> dict[str, str]:
    document = yaml.safe_load(CHART.read_text(encoding="utf-8"))
    return {key: str(document[key]) for key in ("version", "appVersion")}


def test_the_chart_has_the_package_version() -> None:
    assert chart() == {"version": reconsume.__version__, "appVersion": reconsume.__version__}
    assert check_version.package_version() == reconsume.__version__
    assert check_version.problems() == []


def test_the_distribution_takes_its_version_from_the_package() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        pyproject = tomllib.load(file)
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "reconsume.__version__"}


def test_the_operator_defaults_name_the_images_the_chart_tags() -> None:
    app_version = chart()["appVersion"]
    config = OperatorConfig()
    assert config.image == f"ghcr.io/reconsume/reconsume:{app_version}"
    assert config.dlq_jobs_image == f"ghcr.io/reconsume/dlq-jobs:{app_version}"
    assert config.image.endswith(f":{app_version}")


def test_images_are_built_with_the_package_version_as_their_tag() -> None:
    assert build_images.parse([]).tag is None  # then main() tags with package_version()
    assert build_images.package_version() == reconsume.__version__
    # The names the chart and the operator give the images by default.
    repository = build_images.DEFAULT_REPOSITORY
    references = {
        f"{repository}/{image.name}:{reconsume.__version__}" for image in build_images.IMAGES
    }
    assert OperatorConfig().image in references
    assert OperatorConfig().dlq_jobs_image in references


def test_cli_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"reconsume {reconsume.__version__}\n"


def test_check_version_names_a_chart_that_disagrees(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('"""The package."""\n\n__version__ = "0.2.0"\n')
    other = tmp_path / "Chart.yaml"
    other.write_text('apiVersion: v2\nname: reconsume\nversion: 0.2.0\nappVersion: "0.1.0"\n')
    (problem,) = check_version.problems(init, other)
    assert "appVersion is '0.1.0'" in problem
    assert "'0.2.0'" in problem
    other.write_text('apiVersion: v2\nname: reconsume\nversion: 0.2.0\nappVersion: "0.2.0"\n')
    assert check_version.problems(init, other) == []


def test_check_version_passes_on_this_checkout() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOLS / "check_version.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
