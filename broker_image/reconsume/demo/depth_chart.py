"""The chart ``reconsume demo`` draws: where a consumer group's messages were, second by second.

The demo samples its group about twice a second (:class:`Sample`) and notes what it did and
when (:class:`Marker`); :func:`render` draws both into a PNG::

    render(samples, markers, Path("demo.png"), title="Orders during an outage", group="orders")

Layout: the messages in trouble are a stacked area on the left axis, bottom to top those
waiting out a retry delay, those due in ``%RETRY%<group>`` and the dead letters in
``%DLQ%<group>``, so the top edge is everything not yet processed. The cumulative count of
processed orders is a line on a right-hand axis of its own: it grows far beyond the depths
and would flatten them on a shared axis. Each marker is a dashed vertical line labelled
along it, so labels of close markers do not run into each other; the legend sits below the
plot.

matplotlib is an optional dependency (the ``demo`` extra) and is imported only by
:func:`render`; it draws through its Agg canvas directly, without pyplot, so no display,
backend choice or global figure registry is involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconsume.errors import ReconsumeError

__all__ = ["Marker", "Sample", "render"]

WIDTH_PX: Final = 1200
HEIGHT_PX: Final = 600
DPI: Final = 100

_WAITING_COLOR: Final = "#f4a261"
_RETRY_COLOR: Final = "#e76f51"
_DLQ_COLOR: Final = "#9b2226"
_CONSUMED_COLOR: Final = "#2a9d8f"
_MARKER_COLOR: Final = "#4a4a4a"


@dataclass(frozen=True, slots=True)
class Sample:
    """Where the group's messages were at one moment."""

    t: float
    """Seconds since the demo started."""
    waiting: int
    """Retries waiting out their delay on the brokers (schedule and timer pending)."""
    retry_depth: int
    """Messages in ``%RETRY%<group>`` that are due and not consumed yet."""
    dlq_depth: int
    """Messages in ``%DLQ%<group>`` that no dead-letter job has handled."""
    consumed: int
    """Orders processed successfully so far (cumulative)."""


@dataclass(frozen=True, slots=True)
class Marker:
    """Something the demo did, such as "payment service down" or "Drain job"."""

    t: float
    """Seconds since the demo started."""
    label: str


def render(
    samples: Sequence[Sample],
    markers: Sequence[Marker],
    path: Path,
    *,
    title: str,
    group: str,
) -> Path:
    """Draw the samples and markers into a 1200x600 PNG at ``path``, and return ``path``.

    Samples may come in any order. Without samples the PNG still has its axes, the markers
    and a note saying there was nothing to draw. Raises ReconsumeError when matplotlib is
    not installed; errors writing the file propagate as OSError.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise ReconsumeError(
            "the demo's chart needs matplotlib: install it with pip install 'reconsume[demo]'"
        ) from exc

    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself to the figure; savefig draws through it
    depths = figure.add_subplot()
    totals = depths.twinx()

    ordered = sorted(samples, key=lambda sample: sample.t)
    seconds = [sample.t for sample in ordered]
    depths.stackplot(
        seconds,
        [sample.waiting for sample in ordered],
        [sample.retry_depth for sample in ordered],
        [sample.dlq_depth for sample in ordered],
        labels=(
            "waiting to retry (delay not over)",
            f"%RETRY%{group} (due)",
            f"%DLQ%{group} (dead letters)",
        ),
        colors=(_WAITING_COLOR, _RETRY_COLOR, _DLQ_COLOR),
        alpha=0.85,
    )
    totals.plot(
        seconds,
        [sample.consumed for sample in ordered],
        color=_CONSUMED_COLOR,
        linewidth=2,
        label="orders processed (cumulative, right axis)",
    )
    if not ordered:
        depths.text(
            0.5,
            0.5,
            "no samples were taken",
            transform=depths.transAxes,
            ha="center",
            va="center",
            color=_MARKER_COLOR,
        )

    for marker in markers:
        depths.axvline(marker.t, color=_MARKER_COLOR, linestyle="--", linewidth=1)
        depths.annotate(
            marker.label,
            xy=(marker.t, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4, -6),
            textcoords="offset points",
            rotation=90,
            ha="right",
            va="top",
            fontsize=9,
            color=_MARKER_COLOR,
            # Readable over the stacked areas too.
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"},
        )

    # The axis starts when the demo did; a little room on the right keeps a last marker's
    # label inside the plot.
    times = [0.0, *seconds, *(marker.t for marker in markers)]
    start, end = min(times), max(times)
    span = end - start if end > start else 1.0
    depths.set_xlim(start, start + span * 1.02)
    if ordered:
        depths.set_ylim(bottom=0)
        totals.set_ylim(bottom=0)
    else:  # matplotlib's default for empty axes is a range of 0.05 around zero
        depths.set_ylim(0, 1)
        totals.set_ylim(0, 1)
    depths.set_title(title)
    depths.set_xlabel("seconds since the demo started")
    depths.set_ylabel("messages not processed yet")
    totals.set_ylabel("orders processed", color=_CONSUMED_COLOR)
    depths.grid(axis="y", alpha=0.3)
    for axes in (depths, totals):  # counts of messages: no ticks at 0.5
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))

    handles, labels = depths.get_legend_handles_labels()
    total_handles, total_labels = totals.get_legend_handles_labels()
    # Below the plot, where it hides neither data nor marker labels.
    figure.legend(
        handles + total_handles,
        labels + total_labels,
        loc="outside lower center",
        ncols=2,
        fontsize=9,
        frameon=False,
    )

    figure.savefig(path, format="png", dpi=DPI)
    return path
