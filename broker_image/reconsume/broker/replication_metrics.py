"""Replication's metrics, read when ``/metrics`` is scraped.

Every broker: ``replication_master`` (1 on the master of its broker name, 0 on a replica),
``replication_epoch`` (the epoch its log is in), ``failovers_total`` (times this broker took
the lease from another) and ``broker_replicas_declared`` (``--replicas``: brokers of its name,
itself included). A master: ``replication_in_sync_replicas`` and
``replication_connected_replicas``; per replica ``replica_in_sync``, ``replica_lag_bytes``
(log bytes it has not stored), ``replica_lag_messages`` (messages it has not stored) and
``replica_lag_seconds`` (age of the oldest of them; :mod:`reconsume.broker.replica_lag`); and
the Sync writes answered ``SLAVE_NOT_AVAILABLE`` or accepted with nobody in sync. A replica
whose connection closed stays reported, its lag growing, until it returns, as long as the
master reports fewer than ``--replicas`` minus one replicas. A replica:
``replica_behind_bytes`` (the master's log end as last told, minus its own) and
``replica_connected``. Replica labels are the identities of the brokers of one name, a handful.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from reconsume.broker.replica_lag import oldest_age_s, replica_lag
from reconsume.broker.roles import MasterRole, ReplicaRole, Role

PREFIX = "reconsume_"


def replication_metrics(role: Role | None, failovers: int) -> Iterable[Metric]:
    if role is None:
        return
    store = role.context.store
    epoch = store.epochs.current
    yield GaugeMetricFamily(
        PREFIX + "replication_master",
        "1 on the master of its broker name, 0 on a replica.",
        value=float(isinstance(role, MasterRole)),
    )
    yield GaugeMetricFamily(
        PREFIX + "replication_epoch",
        "The epoch this broker's log is in (raised at every change of master).",
        value=0 if epoch is None else epoch.epoch,
    )
    taken = CounterMetricFamily(
        PREFIX + "failovers", "Times this broker took over as master from another."
    )
    taken.add_metric([], failovers)
    yield taken
    yield GaugeMetricFamily(
        PREFIX + "broker_replicas_declared",
        "Brokers of this broker name, this one included (--replicas; 1: no replica).",
        value=role.context.settings.replicas,
    )
    if isinstance(role, MasterRole):
        yield from _master(role)
    elif isinstance(role, ReplicaRole):
        yield from _replica(role)


def _master(role: MasterRole) -> Iterable[Metric]:
    replicas = role.replicas
    store = role.context.store
    yield GaugeMetricFamily(
        PREFIX + "replication_in_sync_replicas",
        "Replicas holding every acknowledged write now (Sync writes wait for them).",
        value=len(replicas.in_sync),
    )
    yield GaugeMetricFamily(
        PREFIX + "replication_connected_replicas",
        "Replicas streaming this master's log now, in sync or not.",
        value=len(replicas.replicas),
    )
    in_sync = GaugeMetricFamily(
        PREFIX + "replica_in_sync",
        "1 while a replica is in the in-sync set; 0 behind, or disconnected.",
        labels=["replica"],
    )
    lag_bytes = GaugeMetricFamily(
        PREFIX + "replica_lag_bytes",
        "Commit-log bytes a replica has not stored yet.",
        labels=["replica"],
    )
    lag_messages = GaugeMetricFamily(
        PREFIX + "replica_lag_messages",
        "Messages a replica has not stored yet.",
        labels=["replica"],
    )
    lag_seconds = GaugeMetricFamily(
        PREFIX + "replica_lag_seconds",
        "Age of the oldest message a replica has not stored yet (0: it holds them all).",
        labels=["replica"],
    )
    now_ms = time.time_ns() // 1_000_000
    for state in replicas.reported(role.context.settings.replicas - 1):
        name = [state.replica_id]
        in_sync.add_metric(name, float(state.in_sync))
        lag_bytes.add_metric(name, replicas.lag_bytes(state.replica_id))
        lag = replica_lag(store, state.acked)
        lag_messages.add_metric(name, lag.messages)
        seconds = oldest_age_s(store, lag, now_ms)
        if seconds is not None:
            lag_seconds.add_metric(name, seconds)
    yield from (in_sync, lag_bytes, lag_messages, lag_seconds)
    refused = CounterMetricFamily(
        PREFIX + "replication_refused_writes",
        "Sync-replicated writes answered SLAVE_NOT_AVAILABLE: no replica was in sync.",
    )
    refused.add_metric([], replicas.refused_total)
    yield refused
    alone = CounterMetricFamily(
        PREFIX + "replication_stored_alone",
        "Sync-replicated writes accepted on the master alone (replication_accept_alone).",
    )
    alone.add_metric([], replicas.stored_alone_total)
    yield alone


def _replica(role: ReplicaRole) -> Iterable[Metric]:
    state = role.follower.state
    store = role.context.store
    yield GaugeMetricFamily(
        PREFIX + "replica_behind_bytes",
        "The master's log end as last told, minus this replica's.",
        value=max(state.master_end - store.commitlog.write_offset, 0),
    )
    yield GaugeMetricFamily(
        PREFIX + "replica_connected",
        "1 while this replica streams from its master.",
        value=float(state.connected),
    )
