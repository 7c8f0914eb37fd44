"""The lease that says which broker of a broker name is master, in which epoch, and which
replicas are in sync: the one record failover decides on.

A record is changed only by compare-and-swap on its version, so two brokers never both think
they took it. Where it lives is a :class:`LeaseStore`: for brokers on one machine a file
(:class:`FileLeaseStore`), whose read-modify-write is serialised by ``flock``; on Kubernetes a
``coordination.k8s.io`` Lease (:mod:`reconsume.broker.kube_lease`: the API server's etcd is the
quorum).

No clock is shared: like client-go's leader election, a broker judges a lease expired when its
version has not changed for ``duration_s`` by its *own* monotonic clock, counted from when it
saw the version change. The master stops writing ``margin`` before its own deadline, counted
from before its renewal was sent, so it has stopped before anyone may take over.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from reconsume.errors import ReconsumeError
from reconsume.store.atomic import fsync_directory, keep_backup, write_synced


class LeaseConflict(ReconsumeError):
    """The record changed since it was read: someone else wrote it."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str | None
    """The master's identity (None: nobody holds it yet)."""
    address: str | None
    """The master's remoting address, for replicas to follow."""
    epoch: int
    """Raised by one on every change of holder; the master writes in this epoch."""
    in_sync: tuple[str, ...] = ()
    """Replicas that hold every acknowledged write: only they may take over."""
    duration_s: float = 6.0
    version: str = ""
    """Compare-and-swap token; changes on every write (renewals included)."""

    def taken_by(self, holder: str, address: str) -> LeaseRecord:
        return replace(self, holder=holder, address=address, epoch=self.epoch + 1, in_sync=())


class LeaseStore(Protocol):
    async def read(self) -> LeaseRecord | None: ...

    async def write(self, record: LeaseRecord, expected_version: str | None) -> LeaseRecord:
        """Store ``record`` if the stored version is ``expected_version`` (None: no record
        yet); returns it with its new version, or raises :class:`LeaseConflict`."""
        ...


class FileLeaseStore:
    """A lease in one JSON file, for brokers on one machine (embedded mode, tests)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    async def read(self) -> LeaseRecord | None:
        return await asyncio.to_thread(self._read)

    async def write(self, record: LeaseRecord, expected_version: str | None) -> LeaseRecord:
        return await asyncio.to_thread(self._write, record, expected_version)

    def _read(self) -> LeaseRecord | None:
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        document["in_sync"] = tuple(document.get("in_sync", ()))
        return LeaseRecord(**document)

    def _write(self, record: LeaseRecord, expected_version: str | None) -> LeaseRecord:
        """Compare-and-swap under ``flock``, holding the lock only to read, compare and rename:
        the new file is written and synced before, so a writer stopped (SIGSTOP) or slowed
        while it holds the lock blocks the others for a rename, not for two fsyncs; and a lock
        held past :data:`LOCK_WAIT_S` is a conflict to retry, not a thread waiting forever."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stored = replace(record, version=str(int(expected_version or 0) + 1))
        prepared = self.path.with_name(f"{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        write_synced(prepared, json.dumps(asdict(stored)).encode())
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(fd, self._lock_path)
                current = self._read()
                found = None if current is None else current.version
                if found != expected_version:
                    raise LeaseConflict(
                        f"lease {self.path} is at version {found}, not {expected_version}"
                    )
                if self.path.exists():
                    keep_backup(self.path)
                os.replace(prepared, self.path)
            finally:
                os.close(fd)  # releases the lock
        finally:
            prepared.unlink(missing_ok=True)
        fsync_directory(self.path.parent)
        return stored


LOCK_WAIT_S = 2.0
"""Longest wait for the lease file's lock before the write counts as a conflict."""


def _lock(fd: int, path: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LeaseConflict(
                    f"{path} stayed locked for {LOCK_WAIT_S} s (its holder stopped?)"
                ) from None
            time.sleep(0.005)
        else:
            return
