"""Replication's metrics on a master and on a replica, and how far behind a replica is in
messages and in time (counted in the master's consume queues)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from reconsume.broker.context import BrokerContext
from reconsume.broker.replica_lag import ReplicaLag, oldest_age_s, replica_lag
from reconsume.broker.replicas import MAX_DEPARTED, ReplicaSet
from reconsume.broker.replication_metrics import replication_metrics
from reconsume.broker.roles import MasterRole, ReplicaRole
from reconsume.broker.settings import BrokerSettings
from reconsume.engine.delays import DelayLevels
from reconsume.errors import InvalidArgumentError
from reconsume.store import MessageStore, PutRequest, StoreSettings

from ._context import sync_replicated_context


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    with sync_replicated_context(tmp_path, replicas=3) as context:
        yield context


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
    assert found["reconsume_replication_connected_replicas"] == 2
    assert found["reconsume_broker_replicas_declared"] == 3
    assert (found["reconsume_replica_in_sync{b-1}"], found["reconsume_replica_in_sync{b-2}"]) == (
        1,
        0,
    )
    assert found["reconsume_replica_lag_bytes{b-1}"] == 0
    assert found["reconsume_replica_lag_bytes{b-2}"] == end
    assert found["reconsume_replica_lag_messages{b-1}"] == 0
    assert found["reconsume_replica_lag_messages{b-2}"] == 1
    assert found["reconsume_replica_lag_seconds{b-1}"] == 0
    assert found["reconsume_replica_lag_seconds{b-2}"] >= 0  # never caught up: still reported
    assert found["reconsume_replication_refused_writes_total"] == 0


def test_a_replica_reports_how_far_behind_it_is(context: BrokerContext) -> None:
    role = ReplicaRole(context, "b-1", "127.0.0.1:1")
    role.follower.state.master_end = 5000
    found = samples(list(replication_metrics(role, 0)))
    assert found["reconsume_replication_master"] == 0
    assert found["reconsume_replica_behind_bytes"] == 5000
    assert found["reconsume_replica_connected"] == 0
    assert found["reconsume_broker_replicas_declared"] == 3
    assert list(replication_metrics(None, 0)) == []


def test_a_departed_replica_stays_reported_falling_behind_until_it_returns(
    context: BrokerContext,
) -> None:
    role = MasterRole(context, context.settings, DelayLevels.parse("1s"))
    store = context.store
    store.append(PutRequest("orders", 0, b"x" * 100))
    end = store.commitlog.write_offset
    role.replicas.seen("b-1", "x", end, end, now_s=0.0)
    role.replicas.forget("b-1", now_s=1.0)
    for i in range(5):
        store.append(PutRequest("orders", i % 2, b"y" * 50))
    found = samples(list(replication_metrics(role, 0)))
    assert found["reconsume_replication_in_sync_replicas"] == 0
    assert found["reconsume_replication_connected_replicas"] == 0
    assert found["reconsume_replica_in_sync{b-1}"] == 0
    assert found["reconsume_replica_lag_messages{b-1}"] == 5
    assert found["reconsume_replica_lag_bytes{b-1}"] == store.commitlog.write_offset - end
    assert found["reconsume_replica_lag_seconds{b-1}"] >= 0
    # back, and caught up: in sync again, nothing missing
    now = store.commitlog.write_offset
    role.replicas.seen("b-1", "x", now, now, now_s=2.0)
    found = samples(list(replication_metrics(role, 0)))
    assert found["reconsume_replica_in_sync{b-1}"] == 1
    assert found["reconsume_replica_lag_messages{b-1}"] == 0
    assert found["reconsume_replica_lag_seconds{b-1}"] == 0
    assert role.replicas.departed == {}


def test_a_master_reports_no_more_replicas_than_declared(context: BrokerContext) -> None:
    context.settings = dataclasses.replace(context.settings, replicas=2)
    role = MasterRole(context, context.settings, DelayLevels.parse("1s"))
    role.replicas.seen("b-2", "y", 0, 0, now_s=0.0)
    role.replicas.forget("b-2", now_s=1.0)
    role.replicas.seen("b-1", "x", 0, 0, now_s=2.0)  # b-2 replaced (a pod renamed, say)
    found = samples(list(replication_metrics(role, 0)))
    assert "reconsume_replica_lag_messages{b-1}" in found
    assert "reconsume_replica_lag_messages{b-2}" not in found
    context.settings = dataclasses.replace(context.settings, replicas=1)  # no replica declared
    role.replicas.forget("b-1", now_s=3.0)
    found = samples(list(replication_metrics(role, 0)))
    assert not [name for name in found if name.startswith("reconsume_replica_lag")]
    assert found["reconsume_broker_replicas_declared"] == 1


def test_departed_replicas_are_reported_latest_first_and_kept_bounded() -> None:
    replicas = ReplicaSet(log_end=lambda: 0, sync=False, lag_max_s=1.0, accept_alone=False)
    replicas.seen("b-0", "a", 0, 0, now_s=0.0)
    for i in range(1, MAX_DEPARTED + 3):
        replicas.seen(f"b-{i}", "a", 0, 0, now_s=float(i))
        replicas.forget(f"b-{i}", now_s=float(i))
    assert len(replicas.departed) == MAX_DEPARTED
    assert "b-1" not in replicas.departed  # the first to leave went first
    last = f"b-{MAX_DEPARTED + 2}"
    assert [s.replica_id for s in replicas.reported(2)] == ["b-0", last]
    assert [s.replica_id for s in replicas.reported(0)] == ["b-0"]  # connected ones always
    assert replicas.lag_bytes(last) == 0


def test_declared_replicas_are_one_or_more() -> None:
    assert BrokerSettings(store_dir="s").replicas == 1
    with pytest.raises(InvalidArgumentError, match="setting replicas: 0 is not 1 or more"):
        BrokerSettings(store_dir="s", replicas=0)


# ------------------------------------------------------------------ lag in messages and time
@pytest.fixture
def small_store(tmp_path: Path) -> Iterator[MessageStore]:
    """Segments of a few records (each closed by a blank record) and consume-queue files of
    four entries, so lag counts cross both."""
    settings = StoreSettings(
        commit_log_segment_bytes=2048,
        max_message_bytes=1024,
        consume_queue_entries_per_file=4,
        preallocate=False,
    )
    with MessageStore(tmp_path / "small", settings, background=False) as store:
        yield store


def test_the_messages_a_replica_lacks_are_counted_exactly_at_every_offset(
    small_store: MessageStore,
) -> None:
    queues = [("orders", 0), ("orders", 1), ("payments", 0), ("%RETRY%GID_a", 0)]
    results = [
        small_store.append(PutRequest(*queues[i % 3 if i < 20 else 3], b"m" * (60 + 37 * i % 300)))
        for i in range(40)
    ]
    assert len(small_store.commitlog.segments) > 3  # records and blanks across segments
    records = [(r.commit_log_offset, r.commit_log_offset + r.size) for r in results]
    for offset in range(small_store.commitlog.write_offset + 1):
        lacking = [start for start, end in records if end > offset]  # partial records count
        expected = ReplicaLag(len(lacking), min(lacking) if lacking else None)
        assert replica_lag(small_store, offset) == expected, offset
    assert replica_lag(small_store, 1 << 40) == ReplicaLag(0, None)


def test_the_lag_in_seconds_is_the_age_of_the_oldest_message_lacking(
    small_store: MessageStore,
) -> None:
    first = small_store.append(PutRequest("orders", 0, b"a" * 100))
    small_store.append(PutRequest("orders", 1, b"b" * 100))
    lag = replica_lag(small_store, first.commit_log_offset + 10)  # holds part of the first
    assert lag == ReplicaLag(2, first.commit_log_offset)
    assert oldest_age_s(small_store, lag, first.store_timestamp_ms + 2500) == 2.5
    assert oldest_age_s(small_store, lag, first.store_timestamp_ms - 10) == 0  # clock stepped
    assert oldest_age_s(small_store, ReplicaLag(0, None), 0) == 0
    assert oldest_age_s(small_store, ReplicaLag(1, 1 << 30), 0) is None  # gone meanwhile
