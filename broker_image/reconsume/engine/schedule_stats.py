"""Counters of the schedule service, turned into Prometheus samples when scraped.

Plain integers and a fixed-bucket histogram: one observation per delivered message costs a
bisect and two additions, and nothing here imports prometheus-client.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

LATENESS_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
"""Upper bounds (seconds) of the lateness histogram's buckets; +Inf is implied."""


class Histogram:
    """Observations counted per bucket (not cumulative), with their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations ≤ it) per bucket, +Inf last, as Prometheus wants."""
        total = 0
        result = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            result.append((bound, total))
        return result


class ScheduleStats:
    """Totals since the broker started."""

    __slots__ = (
        "already_delivered",
        "delivered",
        "discarded",
        "lateness",
        "put_failures",
        "redelivered_duplicates",
    )

    def __init__(self) -> None:
        self.delivered: dict[int, int] = {}
        """Messages delivered to their real topic, per delay level."""
        self.lateness = Histogram(LATENESS_BUCKETS_S)
        """Seconds from each delivered message's due time to its delivery."""
        self.already_delivered = 0
        """Entries found delivered before a restart or failover and not delivered again (the
        copy already in the log is what consumers get)."""
        self.redelivered_duplicates = 0
        """Entries delivered although the log held a delivery of them found at start: 0 while
        such entries are skipped (see ``already_delivered``)."""
        self.put_failures = 0
        """Deliveries the store refused (each is retried at the same entry)."""
        self.discarded = 0
        """Schedule entries that could not be delivered at all (record gone, no real topic,
        refused as invalid) and were skipped."""
