"""The metrics collector over a real store: what a scrape reports, and the per-queue cap."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconsume.broker.context import BrokerContext
from reconsume.broker.health import Readiness
from reconsume.broker.metrics import broker_registry
from reconsume.broker.settings import BrokerSettings
from reconsume.message.address import HostAddress
from reconsume.store import MessageStore, PutRequest, StoreSettings
from reconsume.wire.h2.stats import TransportStats


class Source:
    def __init__(self, context: BrokerContext | None) -> None:
        self.context = context

    def current_context(self) -> BrokerContext | None:
        return self.context

    def connection_count(self) -> int:
        return 2

    def registration_results(self) -> Mapping[str, Sequence[int]]:
        return {"127.0.0.1:9876": [3, 1]}

    def readiness(self) -> Readiness:
        return Readiness(self.context is not None, "ok")

    def current_role(self) -> None:
        return None

    def failovers(self) -> int:
        return 0

    def acl_guard(self) -> None:
        return None

    def tls_listener(self) -> None:
        return None

    def grpc_stats(self) -> TransportStats | None:
        return None


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    store_settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    settings = BrokerSettings(store_dir=str(tmp_path), store=store_settings)
    host = HostAddress.parse("127.0.0.1:10911")
    with MessageStore(tmp_path, store_settings, store_host=host, background=False) as store:
        yield BrokerContext(settings, store, host, lambda: None)


def scrape(source: Source, max_queue_series: int = 100) -> dict[tuple[str, str], float]:
    text = generate_latest(broker_registry(source, max_queue_series)).decode()
    return {
        (sample.name, ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_before_the_store_opens_only_process_and_registration_metrics(tmp_path: Path) -> None:
    samples = scrape(Source(None))
    assert samples[("reconsume_ready", "")] == 0
    assert samples[("reconsume_connections", "")] == 2
    key = ("reconsume_namesrv_registrations_total", "namesrv=127.0.0.1:9876,result=failure")
    assert samples[key] == 1
    assert not any(name.startswith("reconsume_store") for name, _ in samples)


def test_a_scrape_reports_traffic_store_and_queues(context: BrokerContext) -> None:
    for queue_id in (0, 1, 1):
        context.store.put(PutRequest("orders", queue_id, b"abc"))
    context.stats.stored("orders", 3, 9)
    context.stats.delivered("orders", "g", 2)
    samples = scrape(Source(context))
    assert samples[("reconsume_messages_in_total", "topic=orders")] == 3
    assert samples[("reconsume_messages_in_bytes_total", "topic=orders")] == 9
    assert samples[("reconsume_messages_out_total", "group=g,topic=orders")] == 2
    assert samples[("reconsume_queue_max_offset", "queue_id=0,topic=orders")] == 1
    assert samples[("reconsume_queue_max_offset", "queue_id=1,topic=orders")] == 2
    assert samples[("reconsume_store_bytes", "")] == context.store.size_bytes > 0
    assert samples[("reconsume_store_writable", "")] == 1
    assert samples[("reconsume_ready", "")] == 1


def test_per_queue_series_stop_at_the_cap_and_the_rest_are_counted(
    context: BrokerContext,
) -> None:
    for queue_id in range(5):
        context.store.put(PutRequest("wide", queue_id, b"x"))
    samples = scrape(Source(context), max_queue_series=2)
    shown = [labels for name, labels in samples if name == "reconsume_queue_max_offset"]
    assert shown == ["queue_id=0,topic=wide", "queue_id=1,topic=wide"]
    assert samples[("reconsume_queue_series_omitted", "")] == 3


def test_every_broker_has_its_own_registry(context: BrokerContext) -> None:
    context.stats.stored("a", 1, 1)
    assert scrape(Source(context))[("reconsume_messages_in_total", "topic=a")] == 1
    assert ("reconsume_messages_in_total", "topic=a") not in scrape(Source(None))
