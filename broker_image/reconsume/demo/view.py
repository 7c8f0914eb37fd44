"""The demo's terminal output: a live view (rich) on a terminal, plain lines elsewhere."""

from __future__ import annotations

from typing import Protocol, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from reconsume.demo.progress import Progress

EVENTS_SHOWN = 8


class View(Protocol):
    def event(self, progress: Progress) -> None: ...

    def refresh(self, progress: Progress) -> None: ...

    def close(self) -> None: ...


def stages(progress: Progress) -> Table:
    """Where the orders are."""
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("stage")
    table.add_column("messages", justify="right")
    table.add_column("", style="dim")
    rows = [
        ("orders produced", progress.produced, "topic orders"),
        ("deliveries to the consumer", progress.attempts, "first tries and retries"),
        ("failed deliveries", progress.failed, "payment service refused: sent back"),
        ("waiting to retry", progress.waiting, "held by the broker until their delay is up"),
        (f"in %RETRY%{progress.group}", progress.retry_depth, "due, not consumed yet"),
        (f"in %DLQ%{progress.group}", progress.dlq_depth, "dead letters not handled by a job"),
        ("dead-lettered (total)", progress.dead_lettered, "after the last retry"),
        ("archived to Parquet", progress.archived, "Drain job"),
        ("re-sent to orders", progress.resent, "Reprocess job"),
        ("paid", len(progress.paid), "consumed successfully"),
    ]
    for label, count, note in rows:
        table.add_row(label, str(count), note)
    return table


def _render(progress: Progress) -> Group:
    events = Text()
    for at, text in progress.events[-EVENTS_SHOWN:]:
        events.append(f"{at:6.1f}s  ", style="dim")
        events.append(text + "\n")
    header = Text(f"{progress.elapsed():5.1f}s  ", style="dim")
    header.append(progress.phase, style="bold")
    return Group(
        Panel(header, title="reconsume demo", title_align="left"),
        stages(progress),
        Panel(events, title="events", title_align="left"),
    )


class LiveView:
    def __init__(self, console: Console, progress: Progress) -> None:
        self._live = Live(_render(progress), console=console, refresh_per_second=4)
        self._live.start()

    def event(self, progress: Progress) -> None:
        self.refresh(progress)

    def refresh(self, progress: Progress) -> None:
        self._live.update(_render(progress))

    def close(self) -> None:
        self._live.stop()


class LineView:
    """One line per event: logs, CI, pipes."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._shown = 0

    def event(self, progress: Progress) -> None:
        for at, text in progress.events[self._shown :]:
            print(f"{at:6.1f}s  {text}", file=self._out, flush=True)
        self._shown = len(progress.events)

    def refresh(self, progress: Progress) -> None:
        self.event(progress)

    def close(self) -> None:
        pass


def make_view(console: Console, out: TextIO, progress: Progress) -> View:
    return LiveView(console, progress) if console.is_terminal else LineView(out)
