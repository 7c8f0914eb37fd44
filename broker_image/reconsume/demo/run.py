"""``reconsume demo``: an order consumer whose payment service is down, end to end.

See :mod:`reconsume.demo.scenario` for the story. Everything runs on this machine: a name
server and brokers (embedded mode), the consumer and producer (reconsume's client), the
dead-letter jobs (PySpark in local mode, which needs Java). The run ends with a summary, checks
that no order was lost, and a PNG chart of the depths over time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console

from reconsume.demo import manifests
from reconsume.demo.progress import Progress
from reconsume.demo.scenario import DemoFailed, Scenario
from reconsume.demo.summary import check, render_summary
from reconsume.demo.view import make_view
from reconsume.embedded.jobs import java_problem
from reconsume.errors import ReconsumeError

DEFAULT_DIR = Path("reconsume-demo")
MARKER = ".reconsume-demo"
"""A demo directory holds this file; only such a directory is emptied for a new run."""


def prerequisite_problems() -> list[str]:
    """What this machine lacks for the demo, each with how to get it."""
    problems = []
    java = java_problem()
    if java is not None:
        problems.append(java)
    for module, extra, why in (
        ("pyspark", "spark", "the dead-letter jobs run on PySpark"),
        ("pyarrow", "spark", "the archive is checked with pyarrow"),
        ("matplotlib", "demo", "the chart is drawn with matplotlib"),
    ):
        if importlib.util.find_spec(module) is None:
            problems.append(f"{module} is not installed ({why}): pip install 'reconsume[{extra}]'")
    return problems


def _prepare(directory: Path) -> str | None:
    """Empty ``directory`` for a new run (only if it is a demo directory or empty)."""
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            return (
                f"{directory} exists and is not a demo directory; "
                "choose another with --dir (it is emptied before each run)"
            )
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("reconsume demo data; emptied by the next `reconsume demo`\n")
    return None


def main(directory: Path | None, *, fast: bool = False, out: TextIO = sys.stdout) -> int:
    """Run the demo; 0 when every order ended paid or archived and nothing was lost."""
    problems = prerequisite_problems()
    if problems:
        print("reconsume demo cannot run on this machine:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    directory = (directory or DEFAULT_DIR).resolve()
    refused = _prepare(directory)
    if refused is not None:
        print(f"reconsume demo: {refused}", file=sys.stderr)
        return 2
    plan = manifests.FAST if fast else manifests.FULL
    console = Console(file=out)
    progress = Progress(plan.orders, plan.legacy, manifests.GROUP)
    view = make_view(console, out, progress)
    scenario = Scenario(directory, plan, progress, view)
    failure: str | None = None
    try:
        asyncio.run(_run(scenario))
    except (DemoFailed, ReconsumeError, OSError) as exc:
        failure = str(exc)
    except KeyboardInterrupt:
        failure = "interrupted"
    finally:
        view.close()
    verdict = check(scenario, failure)
    render_summary(console, scenario, verdict)
    return 0 if verdict.ok else 1


async def _run(scenario: Scenario) -> None:
    try:
        await scenario.run()
    finally:
        await scenario.stop()
