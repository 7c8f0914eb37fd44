"""The broker's gRPC transport metrics, from its server's
:class:`~reconsume.wire.h2.stats.TransportStats`: connections, calls by method and gRPC status,
and connections closed for breaking HTTP/2 (by error). A call the RocketMQ protocol refuses
still ends OK at this level (the refusal is in the response's own status, counted where it is
decided, e.g. ``reconsume_pop_messages_total`` and the ACL's refusals); these count what the
transport saw: unknown methods, malformed requests, deadlines, cancellations."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from reconsume.wire.h2.api import StatusCode
from reconsume.wire.h2.stats import ERROR_NAMES, TransportStats

PREFIX = "reconsume_"


def _status_name(code: int) -> str:
    try:
        return StatusCode(code).name
    except ValueError:
        return str(code)


def grpc_metrics(stats: TransportStats | None) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
    """Nothing when the broker serves no gRPC."""
    if stats is None:
        return
    yield GaugeMetricFamily(
        PREFIX + "grpc_connections",
        "Open HTTP/2 connections of the gRPC port.",
        stats.open_connections,
    )
    yield CounterMetricFamily(
        PREFIX + "grpc_accepted_connections",
        "HTTP/2 connections the gRPC port took.",
        stats.accepted_connections,
    )
    calls = CounterMetricFamily(
        PREFIX + "grpc_calls",
        "gRPC calls ended, by method and gRPC status (CANCELLED: by the client, or its "
        "connection lost; method unknown: a path the broker does not serve).",
        labels=["method", "code"],
    )
    for (method, code), count in sorted(stats.calls.items()):
        calls.add_metric([method, _status_name(code)], count)
    yield calls
    errors = CounterMetricFamily(
        PREFIX + "grpc_connection_errors",
        "HTTP/2 connections the broker closed because the client broke the protocol, by the "
        "GOAWAY's error (its other connections serve on).",
        labels=["error"],
    )
    for code, count in sorted(stats.connection_errors.items()):
        errors.add_metric([ERROR_NAMES.get(code, str(code))], count)
    yield errors
