"""The broker processes embedded mode runs for a BrokerCluster: with replicas, each broker's
processes get the operator's pod names, a store each and one lease file per broker name, and
their command lines are what ``reconsume broker`` reads as an elected broker; which process
is master comes from the lease; a store written by a master that was not elected gets its
lease seeded so that its process takes it back."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from reconsume.broker.lease import FileLeaseStore, LeaseRecord
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.cli import broker_settings_of, build_parser
from reconsume.embedded.brokers import (
    LEASE_DURATION_MS,
    SETTINGS_FILE,
    BrokerProcess,
    broker_args,
    broker_processes,
    in_sync,
    lease_path,
    masters,
    read_lease,
    seed_lease,
)
from reconsume.embedded.clusters import settings_toml
from reconsume.topology.clusters import ClusterSpec

NAME_SERVER = "127.0.0.1:9876"


def settings(spec: ClusterSpec, process: BrokerProcess, root: Path) -> BrokerSettings:
    """What ``reconsume broker`` makes of the process's command line and settings file."""
    directory = root / process.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SETTINGS_FILE).write_text(settings_toml(spec))
    return broker_settings_of(
        build_parser().parse_args(broker_args(spec, process, root, NAME_SERVER))
    )


def lease(root: Path, broker: str, holder: str | None, *in_sync_: str, epoch: int = 1) -> None:
    record = LeaseRecord(holder, "127.0.0.1:1" if holder else None, epoch, tuple(in_sync_))
    asyncio.run(FileLeaseStore(lease_path(root, broker)).write(record, None))


def test_each_broker_runs_its_replicas_under_the_operators_pod_names() -> None:
    spec = ClusterSpec("shop", brokers=2, replicas=3)
    processes = broker_processes(spec)
    assert [(p.name, p.broker, p.index, p.identity) for p in processes] == [
        ("shop-broker-0", "shop-broker-0", 0, "shop-broker-0-0"),
        ("shop-broker-r1-0", "shop-broker-0", 1, "shop-broker-0-1"),
        ("shop-broker-r2-0", "shop-broker-0", 2, "shop-broker-0-2"),
        ("shop-broker-1", "shop-broker-1", 0, "shop-broker-1-0"),
        ("shop-broker-r1-1", "shop-broker-1", 1, "shop-broker-1-1"),
        ("shop-broker-r2-1", "shop-broker-1", 2, "shop-broker-1-2"),
    ]
    assert [p.name for p in broker_processes(ClusterSpec("shop", brokers=2))] == [
        "shop-broker-0", "shop-broker-1",
    ]  # fmt: skip
    external = ClusterSpec("shop", replicas=2, external_name_server=NAME_SERVER)
    assert broker_processes(external) == []


def test_replicas_elect_over_one_lease_per_broker_each_with_its_own_store(tmp_path: Path) -> None:
    spec = ClusterSpec("shop", brokers=2, replicas=2, replication="Async", flush="Sync")
    read = {p.name: settings(spec, p, tmp_path) for p in broker_processes(spec)}
    assert {n: (s.broker_name, s.broker_id, s.election) for n, s in read.items()} == {
        "shop-broker-0": ("shop-broker-0", 0, f"file:{tmp_path}/leases/shop-broker-0.json"),
        "shop-broker-r1-0": ("shop-broker-0", 1, f"file:{tmp_path}/leases/shop-broker-0.json"),
        "shop-broker-1": ("shop-broker-1", 0, f"file:{tmp_path}/leases/shop-broker-1.json"),
        "shop-broker-r1-1": ("shop-broker-1", 1, f"file:{tmp_path}/leases/shop-broker-1.json"),
    }
    assert {s.store_dir for s in read.values()} == {
        f"{tmp_path}/{name}/store" for name in read
    }  # fmt: skip
    for broker in read.values():
        assert broker.replication is ReplicationMode.ASYNC
        assert (broker.lease_duration_ms, broker.replicas) == (LEASE_DURATION_MS, 2)
        assert broker.master_address is None  # the lease names the master
        assert (broker.cluster_name, broker.namesrv_addresses) == ("shop", (NAME_SERVER,))
        assert broker.flush_mode.value == "Sync"
    synced = settings(ClusterSpec("shop", replicas=3), BrokerProcess("shop-broker-0", 2), tmp_path)
    assert (synced.replication, synced.broker_id, synced.replicas) == (ReplicationMode.SYNC, 2, 3)


def test_a_broker_without_replicas_runs_alone_with_no_election(tmp_path: Path) -> None:
    spec = ClusterSpec("shop", brokers=1)
    (process,) = broker_processes(spec)
    args = broker_args(spec, process, tmp_path, NAME_SERVER)
    assert not {"--election", "--broker-id", "--replication", "--replicas"} & set(args)
    read = settings(spec, process, tmp_path)
    assert (read.broker_name, read.broker_id, read.election) == ("shop-broker-0", 0, None)
    assert read.replicas == 1
    assert read.store_dir == f"{tmp_path}/shop-broker-0/store"


def test_the_master_is_the_lease_holder(tmp_path: Path) -> None:
    spec = ClusterSpec("shop", brokers=2, replicas=2)
    processes = broker_processes(spec)
    assert masters(spec, tmp_path, processes) == set()  # nobody holds a lease yet
    lease(tmp_path, "shop-broker-0", "shop-broker-0-1", "shop-broker-0-0")
    lease(tmp_path, "shop-broker-1", None)  # handed over, not taken yet
    assert masters(spec, tmp_path, processes) == {"shop-broker-r1-0"}
    alone = ClusterSpec("shop", brokers=2)
    assert masters(alone, tmp_path, broker_processes(alone)) == {"shop-broker-0", "shop-broker-1"}
    assert read_lease(tmp_path / "leases" / "nothing.json") is None


def test_running_processes_are_in_sync_once_the_lease_lists_every_replica(tmp_path: Path) -> None:
    spec = ClusterSpec("shop", brokers=1, replicas=3)
    first, second, third = broker_processes(spec)
    assert not in_sync(spec, tmp_path, [first, second])  # no master yet
    lease(tmp_path, "shop-broker-0", "shop-broker-0-0")
    assert in_sync(spec, tmp_path, [first])
    assert not in_sync(spec, tmp_path, [first, second])
    (tmp_path / "leases" / "shop-broker-0.json").unlink()
    lease(tmp_path, "shop-broker-0", "shop-broker-0-2", "shop-broker-0-0", "shop-broker-0-1")
    assert in_sync(spec, tmp_path, [first, second, third])
    assert not in_sync(spec, tmp_path, [first, second])  # its master is not among them
    assert in_sync(ClusterSpec("shop"), tmp_path, [])


def epochs(root: Path, process: str, *history: tuple[int, int]) -> None:
    store = root / process / "store"
    store.mkdir(parents=True)
    (store / "epochs.json").write_text(json.dumps({"epochs": [list(e) for e in history]}))


def test_a_store_written_without_election_is_handed_the_lease_in_its_epoch(tmp_path: Path) -> None:
    # A broker that ran alone (three starts as master) now gets replicas.
    epochs(tmp_path, "shop-broker-0", (1, 0), (2, 400), (3, 900))
    assert asyncio.run(seed_lease(tmp_path, "shop-broker-0"))
    seeded = read_lease(lease_path(tmp_path, "shop-broker-0"))
    assert seeded is not None
    assert (seeded.holder, seeded.epoch, seeded.in_sync) == ("shop-broker-0-0", 3, ())
    assert seeded.duration_s == LEASE_DURATION_MS / 1000
    # Elected since: the lease is at least as new as the store, and stays.
    assert not asyncio.run(seed_lease(tmp_path, "shop-broker-0"))
    # A fresh store: the first lease is taken as usual.
    assert not asyncio.run(seed_lease(tmp_path, "shop-broker-1"))
    assert read_lease(lease_path(tmp_path, "shop-broker-1")) is None


def test_a_lease_older_than_the_store_is_replaced(tmp_path: Path) -> None:
    # Replicas once, then alone for a while (epochs 5 and 6), now replicas again: the stale
    # holder, a replica whose log stopped at epoch 4, must not win.
    lease(tmp_path, "shop-broker-0", "shop-broker-0-1", epoch=4)
    epochs(tmp_path, "shop-broker-0", (1, 0), (4, 100), (5, 200), (6, 300))
    assert asyncio.run(seed_lease(tmp_path, "shop-broker-0"))
    seeded = read_lease(lease_path(tmp_path, "shop-broker-0"))
    assert seeded is not None
    assert (seeded.holder, seeded.epoch) == ("shop-broker-0-0", 6)
