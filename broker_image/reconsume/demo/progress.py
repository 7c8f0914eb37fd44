"""What the demo counts as it goes, shared by the scenario, the live view and the summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from reconsume.demo.depth_chart import Marker, Sample


@dataclass(slots=True)
class Progress:
    orders: int
    legacy: int
    group: str
    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    produced: int = 0
    attempts: int = 0
    """Deliveries to the consumer (first deliveries and retries)."""
    failed: int = 0
    paid: set[str] = field(default_factory=set)
    duplicates: int = 0
    """Deliveries of an order already paid (at-least-once delivery; the service deduplicates)."""
    waiting: int = 0
    retry_depth: int = 0
    dlq_depth: int = 0
    dead_lettered: int = 0
    archived: int = 0
    kept: int = 0
    resent: int = 0
    samples: list[Sample] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def event(self, text: str, *, mark: str | None = None) -> None:
        now = self.elapsed()
        self.events.append((now, text))
        if mark is not None:
            self.markers.append(Marker(now, mark))

    def sample(self) -> None:
        self.samples.append(
            Sample(self.elapsed(), self.waiting, self.retry_depth, self.dlq_depth, len(self.paid))
        )
