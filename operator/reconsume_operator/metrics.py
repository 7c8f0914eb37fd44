"""The operator's Prometheus metrics (DESIGN §6) and their HTTP endpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

RECONCILES = Counter(
    "reconsume_operator_reconcile",
    "Reconciles by resource kind and result (ok, error, conflict, paused, refused).",
    ["kind", "result"],
)
RECONCILE_SECONDS = Histogram(
    "reconsume_operator_reconcile_seconds",
    "Seconds one reconcile took, by resource kind.",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
DEAD_LETTER_JOB_RUNS = Counter(
    "reconsume_operator_dead_letter_job_runs",
    "Finished DeadLetterJob runs by phase (Succeeded, Failed), each counted once.",
    ["phase"],
)


class Outcome:
    """The result label of one reconcile; ``error`` unless set otherwise."""

    def __init__(self) -> None:
        self.result = "error"


@contextmanager
def reconcile_timer(kind: str) -> Iterator[Outcome]:
    """Count the reconcile of ``kind`` (with the result the block sets) and time it."""
    outcome = Outcome()
    started = time.perf_counter()
    try:
        yield outcome
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - started)
        RECONCILES.labels(kind, outcome.result).inc()


def serve_metrics(
    port: int, registry: CollectorRegistry = REGISTRY
) -> tuple[WSGIServer, Thread, int]:
    """Serve ``/metrics`` on ``port`` (0: any free one); the server, its thread and the port."""
    server, thread = start_http_server(port, registry=registry)
    return server, thread, int(server.server_port)
