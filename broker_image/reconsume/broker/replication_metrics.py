"""Replication's metrics, read when ``/metrics`` is scraped.

Every broker: ``replication_master`` (1 on the master of its broker name, 0 on a replica),
``replication_epoch`` (the epoch its log is in) and ``failovers_total`` (times this broker took
the lease from another). A master: ``replication_in_sync_replicas`` (replicas in sync now),
per replica ``replica_lag_bytes`` (log bytes the replica has not stored) and
``replica_lag_seconds`` (since it last held everything the master had; absent until it first
did), and the Sync writes answered ``SLAVE_NOT_AVAILABLE`` or accepted with nobody in sync. A
replica: ``replica_behind_bytes`` (the master's log end as last told, minus its own) and
``replica_connected``. Replica labels are the brokers of one name (three at most).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

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
    if isinstance(role, MasterRole):
        yield from _master(role)
    elif isinstance(role, ReplicaRole):
        yield from _replica(role)


def _master(role: MasterRole) -> Iterable[Metric]:
    replicas = role.replicas
    yield GaugeMetricFamily(
        PREFIX + "replication_in_sync_replicas",
        "Replicas holding every acknowledged write now (Sync writes wait for them).",
        value=len(replicas.in_sync),
    )
    lag_bytes = GaugeMetricFamily(
        PREFIX + "replica_lag_bytes",
        "Commit-log bytes a replica has not stored yet.",
        labels=["replica"],
    )
    lag_seconds = GaugeMetricFamily(
        PREFIX + "replica_lag_seconds",
        "Seconds since a replica last held everything the master had.",
        labels=["replica"],
    )
    now = time.monotonic()
    for name, state in sorted(replicas.replicas.items()):
        lag_bytes.add_metric([name], replicas.lag_bytes(name))
        if state.caught_up_s is not None:
            lag_seconds.add_metric([name], round(max(now - state.caught_up_s, 0.0), 3))
    yield lag_bytes
    yield lag_seconds
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
