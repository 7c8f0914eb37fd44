"""The demo's end: did every order end up paid or archived, the summary table and the chart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reconsume.demo.depth_chart import render
from reconsume.demo.scenario import Scenario, order_id
from reconsume.demo.view import stages

CHART = "reconsume-demo.png"


@dataclass(slots=True)
class Verdict:
    ok: bool
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    archived_orders: set[str] = field(default_factory=set)
    chart: Path | None = None
    failure: str | None = None


def archived_orders(archive: Path) -> list[str]:
    """The order ids in the Parquet archive (one per row)."""
    import json

    import pyarrow.parquet as pq

    if not archive.exists():
        return []
    table = pq.read_table(archive, columns=["body"])
    return [json.loads(body)["order"] for body in table.column("body").to_pylist()]


def check(scenario: Scenario, failure: str | None) -> Verdict:
    progress = scenario.progress
    produced = {order_id(n) for n in range(1, progress.produced + 1)}
    rows = archived_orders(scenario.archive) if failure is None else []
    archived = set(rows)
    paid = progress.paid
    checks = [
        ("every order produced", progress.produced == scenario.plan.orders,
         f"{progress.produced} of {scenario.plan.orders}"),
        ("every order dead-lettered while payment was down",
         progress.dead_lettered >= scenario.plan.orders,
         f"{progress.dead_lettered} dead letters"),
        ("legacy orders archived, once each", archived == scenario.legacy_orders
         and len(rows) == len(archived), f"{len(rows)} Parquet rows"),
        ("the other orders paid", paid == produced - scenario.legacy_orders,
         f"{len(paid)} paid"),
        ("nothing lost (paid + archived = produced)", paid | archived == produced
         and not paid & archived, f"{len(produced - paid - archived)} missing"),
        ("queues empty at the end", progress.dlq_depth == 0 and progress.retry_depth == 0
         and progress.waiting == 0,
         f"DLQ {progress.dlq_depth}, retry {progress.retry_depth}, waiting {progress.waiting}"),
    ]  # fmt: skip
    if failure is not None:
        checks.insert(0, ("demo ran to the end", False, failure))
    verdict = Verdict(all(ok for _, ok, _ in checks), checks, archived, failure=failure)
    try:
        verdict.chart = render(
            progress.samples,
            progress.markers,
            scenario.directory / CHART,
            title="reconsume demo: retries and dead letters while the payment service is down",
            group=progress.group,
        )
    except Exception as exc:  # noqa: BLE001 - the chart is a bonus; the summary must print
        checks.append(("chart written", False, str(exc)))
        verdict.ok = False
    return verdict


def render_summary(console: Console, scenario: Scenario, verdict: Verdict) -> None:
    progress = scenario.progress
    console.print()
    console.print(f"[bold]Summary[/bold] after {progress.elapsed():.1f} s")
    console.print(stages(progress))
    table = Table(show_header=True, header_style="bold")
    table.add_column("check")
    table.add_column("result")
    table.add_column("")
    for name, ok, detail in verdict.checks:
        table.add_row(name, "[green]ok[/green]" if ok else "[red]FAILED[/red]", detail)
    console.print(table)
    if progress.duplicates:
        console.print(f"{progress.duplicates} deliveries of orders already paid (at-least-once; "
                      "the payment service ignored them)")  # fmt: skip
    console.print(f"manifests: {scenario.manifests}")
    console.print(f"archive (Parquet): {scenario.archive}")
    console.print(f"logs: {scenario.environment.logs}")
    if verdict.chart is not None:
        console.print(f"chart: {verdict.chart}")
    console.print(
        "[bold green]demo passed[/bold green]" if verdict.ok else "[bold red]demo failed[/bold red]"
    )
