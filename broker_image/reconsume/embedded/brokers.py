"""The broker processes of a BrokerCluster in embedded mode, and their command lines.

Broker (shard) ``i`` of cluster ``c`` is the broker name ``c-broker-i``. With ``spec.replicas``
``R`` above 1 it runs ``R`` processes, named as the operator names their pods: index 0
``c-broker-i``, replica ``r`` ``c-broker-r<r>-i``. Each has its own directory (settings file and
store) ``<root>/<process>/``; those of one broker name elect their master over one lease file,
``<root>/leases/c-broker-i.json`` (``--election file:...``), with ``--broker-id`` their index,
``--replication`` the spec's mode and ``--replicas`` its count, as the operator's pods do
(they elect over a Lease). Index 0 takes the first lease; after that whichever process holds
the lease is master, the others follow it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reconsume.broker.lease import FileLeaseStore, LeaseRecord
from reconsume.errors import ReconsumeError
from reconsume.store.epochs import EpochHistory
from reconsume.topology.clusters import ClusterSpec

LEASE_DURATION_MS = 3_000
"""How long an unrenewed master lease lasts: a killed master is replaced after this plus at
most a sixth of it (the broker's default, as on a cluster)."""
SETTINGS_FILE = "broker.toml"


@dataclass(frozen=True, slots=True, order=True)
class BrokerProcess:
    """One broker process: the broker name it serves and its index among that name's."""

    broker: str
    """The broker name (the shard), as routes list it."""
    index: int
    """0: the first master; 1 or 2: a replica (``--broker-id``)."""

    @property
    def name(self) -> str:
        """The process's name, the operator's pod name: ``c-broker-i`` or ``c-broker-r<r>-i``."""
        if self.index == 0:
            return self.broker
        cluster, _, ordinal = self.broker.rpartition("-broker-")
        return f"{cluster}-broker-r{self.index}-{ordinal}"

    @property
    def identity(self) -> str:
        """How the lease names it (holder, in-sync set): ``<broker name>-<index>``."""
        return f"{self.broker}-{self.index}"


def broker_names(cluster: str, count: int) -> list[str]:
    return [f"{cluster}-broker-{ordinal}" for ordinal in range(count)]


def broker_processes(spec: ClusterSpec) -> list[BrokerProcess]:
    """Every process the spec asks for, broker by broker (an external cluster: none)."""
    if spec.external:
        return []
    return [
        BrokerProcess(broker, index)
        for broker in broker_names(spec.name, spec.brokers)
        for index in range(spec.replicas)
    ]


def lease_path(root: Path, broker: str) -> Path:
    """The lease file the processes of ``broker`` elect their master over."""
    return root / "leases" / f"{broker}.json"


def broker_args(
    spec: ClusterSpec, process: BrokerProcess, root: Path, name_server: str
) -> list[str]:
    """The ``reconsume`` arguments of ``process`` (its settings file, ``settings_toml``, in
    ``<root>/<process>/``; ``root`` is the cluster's directory)."""
    directory = root / process.name
    args = [
        "broker",
        "--config",
        str(directory / SETTINGS_FILE),
        "--listen",
        "127.0.0.1:0",
        "--namesrv",
        name_server,
        "--store-dir",
        str(directory / "store"),
        "--broker-name",
        process.broker,
    ]
    if spec.replicated:
        args += [
            "--broker-id",
            str(process.index),
            "--election",
            f"file:{lease_path(root, process.broker)}",
            "--replication",
            spec.replication,
            "--lease-duration-ms",
            str(LEASE_DURATION_MS),
            "--replicas",
            str(spec.replicas),
        ]
    return args


def read_lease(path: Path) -> LeaseRecord | None:
    """The lease in ``path`` (written atomically by the brokers); None when there is none yet
    or it cannot be read."""
    try:
        document = json.loads(path.read_bytes())
        document["in_sync"] = tuple(document.get("in_sync", ()))
        return LeaseRecord(**document)
    except (OSError, ValueError, TypeError):
        return None


def store_epoch(store_dir: Path) -> int:
    """The epoch the store's log was last written in (0: none, or no store yet)."""
    try:
        current = EpochHistory(store_dir / "epochs.json").current
    except (OSError, ReconsumeError):
        return 0
    return 0 if current is None else current.epoch


async def seed_lease(root: Path, broker: str) -> bool:
    """Before the processes of ``broker`` start electing: when its first process's store was
    last written by a master that was not elected (the broker ran without replicas since its
    lease was last written, or never had one), make that process the lease's holder in the
    store's epoch, so that it takes the lease back at once, in the next epoch, and the others
    follow it (a replica with an older log must not win). Whether it did."""
    first = BrokerProcess(broker, 0)
    epoch = store_epoch(root / first.name / "store")
    path = lease_path(root, broker)
    lease = read_lease(path)
    if epoch == 0 or (lease is not None and lease.epoch >= epoch):
        return False
    record = LeaseRecord(first.identity, None, epoch, duration_s=LEASE_DURATION_MS / 1000)
    await FileLeaseStore(path).write(record, None if lease is None else lease.version)
    return True


def masters(spec: ClusterSpec, root: Path, processes: Iterable[BrokerProcess]) -> set[str]:
    """The names of the processes that are their broker's master: the lease holders with
    replicas (none for a broker whose lease nobody holds), else every process."""
    processes = list(processes)
    if not spec.replicated:
        return {p.name for p in processes}
    holders = {}
    for broker in {p.broker for p in processes}:
        lease = read_lease(lease_path(root, broker))
        holders[broker] = None if lease is None else lease.holder
    return {p.name for p in processes if holders[p.broker] == p.identity}


def in_sync(spec: ClusterSpec, root: Path, processes: Iterable[BrokerProcess]) -> bool:
    """Whether each broker name of ``processes`` has a master among them and every other of
    them is listed in sync by the lease (always, without replicas)."""
    if not spec.replicated:
        return True
    by_broker: dict[str, set[str]] = {}
    for process in processes:
        by_broker.setdefault(process.broker, set()).add(process.identity)
    for broker, identities in by_broker.items():
        lease = read_lease(lease_path(root, broker))
        if lease is None or lease.holder not in identities:
            return False
        if not identities - {lease.holder} <= set(lease.in_sync):
            return False
    return True
