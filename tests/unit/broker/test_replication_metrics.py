"""Replication's metrics on a master and on a replica."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from reconsume.broker.context import BrokerContext
from reconsume.broker.replication_metrics import replication_metrics
from reconsume.broker.roles import MasterRole, ReplicaRole
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.engine.delays import DelayLevels
from reconsume.message.address import HostAddress
from reconsume.store import MessageStore, PutRequest, StoreSettings


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    store_settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    settings = BrokerSettings(
        store_dir=str(tmp_path), store=store_settings, replication=ReplicationMode.SYNC
    )
    host = HostAddress.parse("127.0.0.1:10911")
    with MessageStore(tmp_path, store_settings, store_host=host, background=False) as store:
        yield BrokerContext(settings, store, host, lambda: None)


def samples(metrics: list[Metric]) -> dict[str, float]:
    return {
        sample.name + "".join(f"{{{v}}}" for v in sample.labels.values()): sample.value
        for metric in metrics
        for sample in metric.samples
    }


def test_a_master_reports_its_replicas(context: BrokerContext) -> None:
    role = MasterRole(context, context.settings, DelayLevels.parse("1s"))
    context.store.epochs.begin(3, 0)
    context.store.append(PutRequest("orders", 0, b"x" * 100))
    end = context.store.commitlog.write_offset
    role.replicas.seen("b-1", "x", end, end, now_s=0.0)
    role.replicas.seen("b-2", "y", 0, 0, now_s=0.0)
    found = samples(list(replication_metrics(role, 2)))
    assert found["reconsume_replication_master"] == 1
    assert found["reconsume_replication_epoch"] == 3
    assert found["reconsume_failovers_total"] == 2
    assert found["reconsume_replication_in_sync_replicas"] == 1
    assert found["reconsume_replica_lag_bytes{b-1}"] == 0
    assert found["reconsume_replica_lag_bytes{b-2}"] == end
    assert "reconsume_replica_lag_seconds{b-2}" not in found  # never caught up
    assert found["reconsume_replication_refused_writes_total"] == 0


def test_a_replica_reports_how_far_behind_it_is(context: BrokerContext) -> None:
    role = ReplicaRole(context, "b-1", "127.0.0.1:1")
    role.follower.state.master_end = 5000
    found = samples(list(replication_metrics(role, 0)))
    assert found["reconsume_replication_master"] == 0
    assert found["reconsume_replica_behind_bytes"] == 5000
    assert found["reconsume_replica_connected"] == 0
    assert list(replication_metrics(None, 0)) == []
