"""The operator's Prometheus metrics (DESIGN §6) and their HTTP endpoint."""

from __future__ import annotations

import errno
import socket
import socketserver
import time
from collections.abc import Iterator
from contextlib import contextmanager
from threading import Thread
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, make_wsgi_app

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


class _MetricsServer(socketserver.ThreadingMixIn, WSGIServer):
    """Every interface of both IP families on one port: an IPv6 socket with ``IPV6_V6ONLY``
    off (a scrape reaches the pod by whichever family its cluster gives first)."""

    daemon_threads = True
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        # HTTPServer.server_bind would look the wildcard address's name up (getfqdn): skipped.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "reconsume-operator", int(self.server_address[1])
        self.setup_environ()


class _IPv4MetricsServer(_MetricsServer):
    address_family = socket.AF_INET


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        """Scrapes are not logged."""


def serve_metrics(
    port: int, registry: CollectorRegistry = REGISTRY
) -> tuple[WSGIServer, Thread, int]:
    """Serve ``/metrics`` on ``port`` (0: any free one) on every interface, IPv4 and IPv6 (IPv4
    alone on a kernel without IPv6); the server, its thread and the port."""
    app = make_wsgi_app(registry)
    try:
        server = make_server("::", port, app, _MetricsServer, handler_class=_QuietHandler)
    except OSError as exc:
        if exc.errno != errno.EAFNOSUPPORT:
            raise
        server = make_server("0.0.0.0", port, app, _IPv4MetricsServer, handler_class=_QuietHandler)
    thread = Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return server, thread, int(server.server_port)
