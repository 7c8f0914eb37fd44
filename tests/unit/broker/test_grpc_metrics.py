"""The gRPC transport's metrics: nothing without a gRPC port; with one, open and accepted
connections, calls by method and status name, and connection errors by HTTP/2 error name."""

from __future__ import annotations

from reconsume.wire.h2.stats import TransportStats

from .test_metrics import Source
from .test_security_metrics import scrape


class GrpcSource(Source):
    def __init__(self, stats: TransportStats | None) -> None:
        super().__init__(None)
        self.stats = stats

    def grpc_stats(self) -> TransportStats | None:
        return self.stats


def test_a_broker_without_grpc_exports_no_grpc_series() -> None:
    assert not [name for name, _ in scrape(GrpcSource(None)) if "grpc" in name]


def test_calls_connections_and_errors_are_exported_by_name() -> None:
    stats = TransportStats(open_connections=2, accepted_connections=5)
    stats.calls["SendMessage", 0] += 7
    stats.calls["ReceiveMessage", 1] += 2
    stats.calls["unknown", 12] += 1
    stats.calls["AckMessage", 99] += 1
    stats.connection_errors[0x9] += 3
    stats.connection_errors[0x42] += 1
    samples = scrape(GrpcSource(stats))
    assert samples[("reconsume_grpc_connections", "")] == 2
    assert samples[("reconsume_grpc_accepted_connections_total", "")] == 5
    calls = "reconsume_grpc_calls_total"
    assert samples[(calls, "code=OK,method=SendMessage")] == 7
    assert samples[(calls, "code=CANCELLED,method=ReceiveMessage")] == 2
    assert samples[(calls, "code=UNIMPLEMENTED,method=unknown")] == 1
    assert samples[(calls, "code=99,method=AckMessage")] == 1
    errors = "reconsume_grpc_connection_errors_total"
    assert samples[(errors, "error=COMPRESSION_ERROR")] == 3
    assert samples[(errors, "error=66")] == 1
