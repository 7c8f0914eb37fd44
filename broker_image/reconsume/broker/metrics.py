"""The broker's Prometheus metrics, read at scrape time.

Nothing here runs per message: :class:`BrokerCollector` turns the counters the handlers keep
(:mod:`reconsume.broker.stats`), the store's offsets and the client registry into samples
when ``/metrics`` is scraped. Every broker has its own :class:`CollectorRegistry`, so several
brokers in one process (tests, embedded mode) never share or clash over metrics.

Labels stay bounded: topics and consumer groups (both configured objects), name-server
addresses (configured), pull results (a fixed set); per-queue series stop at
``metrics_max_queue_series``. Client ids, hosts and message ids are never labels.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from reconsume import __version__
from reconsume.access.guard import AclGuard
from reconsume.broker.acl_metrics import acl_metrics
from reconsume.broker.context import BrokerContext
from reconsume.broker.grpc_metrics import grpc_metrics
from reconsume.broker.health import Readiness
from reconsume.broker.replication_metrics import replication_metrics
from reconsume.broker.retry_metrics import retry_metrics
from reconsume.broker.roles import Role
from reconsume.broker.tls_metrics import tls_metrics
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.tls_server import TlsListener

PREFIX = "reconsume_"
PYTHON = f"{platform.python_implementation()} {platform.python_version()}"
"""``build_info``'s ``python``: the interpreter's build is a good part of the broker's CPU a
request (docs/images.md)."""


class MetricsSource(Protocol):
    """What the collector reads from the broker."""

    def current_context(self) -> BrokerContext | None:
        """The handlers' shared state; None until the store is open."""

    def connection_count(self) -> int:
        """Open remoting connections."""

    def registration_results(self) -> Mapping[str, Sequence[int]]:
        """Per name server: [successful, failed] registrations."""

    def readiness(self) -> Readiness: ...

    def current_role(self) -> Role | None:
        """Master or replica; None until the broker has one."""

    def failovers(self) -> int:
        """Times this broker took over as master from another."""

    def acl_guard(self) -> AclGuard | None:
        """Access control, when it is on."""

    def grpc_stats(self) -> TransportStats | None:
        """The gRPC port's counters (None: the broker serves no gRPC)."""

    def tls_listener(self) -> TlsListener | None:
        """The remoting port's TLS side (its mode and counters), when TLS is on."""


def _counter(name: str, documentation: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, documentation, labels=labels)


def _gauge(
    name: str, documentation: str, value: float | None = None, labels: Sequence[str] | None = None
) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, value=value, labels=labels)


class BrokerCollector(Collector):
    def __init__(self, source: MetricsSource, max_queue_series: int) -> None:
        self.source = source
        self.max_queue_series = max_queue_series

    def collect(self) -> Iterable[Metric]:
        source = self.source
        build = _gauge(
            "build_info",
            "The running reconsume version and the Python under it (value 1).",
            None,
            ["version", "python"],
        )
        build.add_metric([__version__, PYTHON], 1)
        yield build
        yield _gauge(
            "ready", "1 when /readyz answers 200, else 0.", float(source.readiness().ready)
        )
        yield _gauge("connections", "Open remoting connections.", source.connection_count())
        registrations = _counter(
            "namesrv_registrations",
            "REGISTER_BROKER requests per name server, by result (success or failure).",
            ["namesrv", "result"],
        )
        for address, (succeeded, failed) in sorted(source.registration_results().items()):
            registrations.add_metric([address, "success"], succeeded)
            registrations.add_metric([address, "failure"], failed)
        yield registrations
        context = source.current_context()
        if context is not None:
            yield from self._traffic(context)
            yield from self._store(context)
            yield from self._clients(context)
            yield from retry_metrics(context)
        yield from replication_metrics(source.current_role(), source.failovers())
        yield from acl_metrics(source.acl_guard())
        yield from tls_metrics(source.tls_listener())
        yield from grpc_metrics(source.grpc_stats())

    def _traffic(self, context: BrokerContext) -> Iterable[CounterMetricFamily]:
        stats = context.stats
        messages_in = _counter(
            "messages_in", "Messages stored by sends, per topic (batches count each).", ["topic"]
        )
        bytes_in = _counter(
            "messages_in_bytes", "Body bytes of the messages stored by sends.", ["topic"]
        )
        for topic, count in sorted(stats.messages_in.items()):
            messages_in.add_metric([topic], count)
            bytes_in.add_metric([topic], stats.bytes_in.get(topic, 0))
        messages_out = _counter(
            "messages_out", "Messages returned by pulls, per topic and group.", ["topic", "group"]
        )
        for (topic, group), count in sorted(stats.messages_out.items()):
            messages_out.add_metric([topic, group], count)
        pulls = _counter("pull_requests", "Answered pull requests, by result.", ["result"])
        for result, count in sorted(stats.pulls.items()):
            pulls.add_metric([result], count)
        pop = _counter(
            "pop_messages",
            "Pop consumption by RocketMQ 5's clients, per group and event: received, acked, "
            "invisible_changed, expired (taken back unacknowledged), forwarded (to the DLQ).",
            ["group", "event"],
        )
        for (group, event), count in sorted(stats.pop.items()):
            pop.add_metric([group, event], count)
        yield from (messages_in, bytes_in, messages_out, pulls, pop)

    def _store(self, context: BrokerContext) -> Iterable[GaugeMetricFamily]:
        store = context.store
        log = store.commitlog
        yield _gauge("store_bytes", "Bytes of commit log kept.", store.size_bytes)
        yield _gauge("store_min_offset", "Commit-log offset of the oldest byte.", log.min_offset)
        yield _gauge(
            "store_max_offset", "Commit-log offset one past the last record.", log.write_offset
        )
        yield _gauge(
            "store_writable",
            "1 while the store accepts appends; 0 after a failed flush made it read-only.",
            float(store.durability.failure is None),
        )
        yield _gauge("topics", "Topics configured on this broker.", len(store.topics))
        queues = sorted(store.queues, key=lambda q: (q.topic, q.queue_id))
        shown = queues[: self.max_queue_series]
        max_offsets = _gauge(
            "queue_max_offset",
            "Consume-queue offset one past the newest message, per queue.",
            labels=["topic", "queue_id"],
        )
        for queue in shown:
            max_offsets.add_metric([queue.topic, str(queue.queue_id)], queue.max_offset)
        yield max_offsets
        yield _gauge(
            "queue_series_omitted",
            "Queues left out of reconsume_queue_max_offset (over metrics_max_queue_series).",
            len(queues) - len(shown),
        )

    def _clients(self, context: BrokerContext) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        groups = {
            name: len(group.channels)
            for name, group in context.consumers.consumers.items()
            if group.channels
        }
        yield _gauge(
            "consumer_groups_online", "Consumer groups with a connected client.", len(groups)
        )
        clients = _gauge("consumer_clients", "Connected consumer clients.", None, ["group"])
        for name, count in sorted(groups.items()):
            clients.add_metric([name], count)
        yield clients
        yield _gauge(
            "long_poll_suspended", "Pull requests held by long polling now.", len(context.waiters)
        )
        woken = _counter("long_poll_woken", "Held pull requests a message arrival woke.")
        woken.add_metric([], context.waiters.woken_total)
        yield woken


def broker_registry(source: MetricsSource, max_queue_series: int) -> CollectorRegistry:
    """A registry of its own with the broker's metrics and the process, platform and garbage
    collector metrics prometheus-client provides."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(source, max_queue_series))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
