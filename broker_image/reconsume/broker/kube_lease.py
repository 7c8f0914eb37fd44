"""The election's lease as a Kubernetes ``coordination.k8s.io/v1`` Lease: one object per broker
name, changed by compare-and-swap on its ``resourceVersion`` (the API server's etcd is the
quorum). ``--election kube:NAME`` (namespace: the pod's) or ``kube:NAMESPACE/NAME``.

A :class:`~reconsume.broker.lease.LeaseRecord` maps onto the object as::

    metadata.name                               the lease name (the broker name)
    metadata.resourceVersion                    version
    metadata.annotations
      reconsume.io/master-address               address
      reconsume.io/in-sync                      in_sync, comma-separated
      reconsume.io/lease-duration-ms            duration_s, exactly
    spec.holderIdentity                         holder
    spec.leaseTransitions                       epoch
    spec.leaseDurationSeconds                   duration_s, rounded up
    spec.renewTime                              set on every write
    spec.acquireTime                            set when the holder changes

so ``kubectl get lease`` shows the master. Clocks in ``renewTime`` are informational: like
client-go's leader election, brokers judge expiry by their own monotonic clock
(:mod:`reconsume.broker.lease`). The Elector treats every failure here (:class:`KubeApiError`)
as a failed renewal; the API server refusing the credentials (:class:`KubeAccessError`) ends
a starting broker instead (:meth:`KubeLeaseStore.check_access`).
"""

from __future__ import annotations

import asyncio
import math
import urllib.parse
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from reconsume.broker.kube_api import (
    SERVICE_ACCOUNT_DIR,
    KubeAccessError,
    KubeApi,
    KubeApiError,
    KubeCredentials,
    dns_label_problem,
    dns_subdomain_problem,
    parse_api_url,
    status_error,
)
from reconsume.broker.lease import LeaseConflict, LeaseRecord

ANNOTATION_PREFIX = "reconsume.io/"
ADDRESS = ANNOTATION_PREFIX + "master-address"
IN_SYNC = ANNOTATION_PREFIX + "in-sync"
DURATION_MS = ANNOTATION_PREFIX + "lease-duration-ms"
_OURS = (ADDRESS, IN_SYNC, DURATION_MS)
RBAC_HINT = "the broker's ServiceAccount needs get, create and update on leases"


def parse_kube_election(where: str) -> tuple[str | None, str]:
    """``(namespace or None, name)`` of ``NAME`` or ``NAMESPACE/NAME`` (after ``kube:``);
    ValueError saying what is wrong."""
    namespace, _sep, name = where.rpartition("/")
    if not name:
        raise ValueError(f"kube:{where} names no lease (kube:NAME or kube:NAMESPACE/NAME)")
    problem = dns_subdomain_problem(name)
    if problem is None and _sep:
        problem = dns_label_problem(namespace)
    if problem is not None:
        raise ValueError(f"kube:{where}: {problem}")
    return (namespace if _sep else None), name


def kube_election_problem(
    election: str | None, api: str | None, token_file: str | None, ca_file: str | None
) -> tuple[str, str] | None:
    """``(setting, problem)`` when a ``kube:`` election or the settings reaching its API server
    are wrong (or given without one); None when they are fine."""
    kube = election is not None and election.startswith("kube:")
    if kube and election is not None:
        try:
            parse_kube_election(election.removeprefix("kube:"))
        except ValueError as exc:
            return "election", str(exc)
    given = {"kube_api": api, "kube_token_file": token_file, "kube_ca_file": ca_file}
    for setting, value in given.items():
        if value is not None and not kube:
            return setting, "only with a Kubernetes Lease election (--election kube:...)"
        if value == "":
            return setting, "must not be empty"
    if api is not None:
        try:
            parse_api_url(api)
        except ValueError as exc:
            return "kube_api", str(exc)
    return None


def micro_time(moment: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_of(lease: dict[str, Any]) -> LeaseRecord:
    """The record a Lease holds. Annotations it lacks (a Lease written by something else) give
    no address, nobody in sync and the duration of ``leaseDurationSeconds``."""
    metadata = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    duration_s = LeaseRecord(None, None, 0).duration_s
    if spec.get("leaseDurationSeconds"):
        duration_s = float(spec["leaseDurationSeconds"])
    exact = annotations.get(DURATION_MS, "")
    if exact.isdigit() and int(exact) > 0:
        duration_s = int(exact) / 1000
    in_sync = annotations.get(IN_SYNC, "")
    return LeaseRecord(
        holder=spec.get("holderIdentity") or None,
        address=annotations.get(ADDRESS) or None,
        epoch=int(spec.get("leaseTransitions") or 0),
        in_sync=tuple(member.strip() for member in in_sync.split(",") if member.strip()),
        duration_s=duration_s,
        version=str(metadata.get("resourceVersion", "")),
    )


def lease_object(
    record: LeaseRecord,
    namespace: str,
    name: str,
    now: datetime,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Lease holding ``record``, written over ``previous`` (the stored object, whose other
    metadata and annotations are kept; None: a new object). ``metadata.resourceVersion`` is the
    record's expected version, ``previous``'s."""
    base = previous or {}
    metadata = {
        **(base.get("metadata") or {}),
        "name": name,
        "namespace": namespace,
    }
    annotations = {
        key: value for key, value in (metadata.get("annotations") or {}).items() if key not in _OURS
    }
    if record.address:
        annotations[ADDRESS] = record.address
    if record.in_sync:
        annotations[IN_SYNC] = ",".join(record.in_sync)
    annotations[DURATION_MS] = str(round(record.duration_s * 1000))
    metadata["annotations"] = annotations
    spec: dict[str, Any] = {
        "leaseDurationSeconds": max(1, math.ceil(record.duration_s)),
        "leaseTransitions": record.epoch,
        "renewTime": micro_time(now),
    }
    old_spec = base.get("spec") or {}
    if record.holder is not None:
        spec["holderIdentity"] = record.holder
        same_holder = previous is not None and old_spec.get("holderIdentity") == record.holder
        acquired = old_spec.get("acquireTime") if same_holder else None
        spec["acquireTime"] = acquired or micro_time(now)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


class KubeLeaseStore:
    """One Lease of one namespace, as a :class:`~reconsume.broker.lease.LeaseStore`."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        quoted = urllib.parse.quote(namespace, safe="")
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{quoted}/leases"
        self._path = f"{self._collection}/{urllib.parse.quote(name, safe='')}"
        self._seen: dict[str, Any] | None = None
        """The object last read or written: a write keeps its other fields and acquireTime."""

    def __repr__(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    async def read(self) -> LeaseRecord | None:
        return await asyncio.to_thread(self._read)

    async def write(self, record: LeaseRecord, expected_version: str | None) -> LeaseRecord:
        return await asyncio.to_thread(self._write, record, expected_version)

    async def check_access(self) -> None:
        """Read the Lease once; raises KubeAccessError when the API server refuses the
        credentials or the request (other failures pass: the election retries them)."""
        try:
            await self.read()
        except KubeAccessError:
            raise
        except KubeApiError:
            pass

    def _read(self) -> LeaseRecord | None:
        status, document = self.api.request("GET", self._path)
        if status == 404:
            self._seen = None
            return None
        if status != 200:
            raise self._error("get", status, document)
        self._seen = document
        return record_of(document)

    def _write(self, record: LeaseRecord, expected_version: str | None) -> LeaseRecord:
        now = datetime.now(UTC)
        if expected_version is None:
            body = lease_object(record, self.namespace, self.name, now)
            status, document = self.api.request("POST", self._collection, body)
            if status == 409:
                raise LeaseConflict(f"{self!r} exists already (expected none)")
            if status != 201:
                raise self._error("create", status, document)
        else:
            seen = self._seen
            if seen is None or record_of(seen).version != expected_version:
                seen = None  # a version this store did not see: no fields to keep
            body = lease_object(record, self.namespace, self.name, now, seen)
            body["metadata"]["resourceVersion"] = expected_version
            status, document = self.api.request("PUT", self._path, body)
            if status in (404, 409):
                found = "gone" if status == 404 else "changed"
                raise LeaseConflict(f"{self!r} {found} since version {expected_version}")
            if status != 200:
                raise self._error("update", status, document)
        self._seen = document
        stored = record_of(document)
        return replace(record, version=stored.version)

    def _error(self, verb: str, status: int, document: dict[str, Any]) -> KubeApiError:
        error = status_error(f"{verb} {self!r}", status, document)
        if isinstance(error, KubeAccessError):
            return KubeAccessError(f"{error} ({RBAC_HINT} in namespace {self.namespace})", status)
        return error


def kube_lease_store(
    where: str,
    *,
    api: str | None,
    token_file: str | None,
    ca_file: str | None,
    timeout_s: float,
) -> KubeLeaseStore:
    """The store of ``--election kube:WHERE`` with the given credentials (else the pod's).
    Raises KubeApiError when the namespace or the API server cannot be found."""
    namespace, name = parse_kube_election(where)
    if namespace is None:
        namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
        try:
            namespace = namespace_file.read_text().strip()
        except OSError as exc:
            raise KubeApiError(
                f"kube:{name} takes the namespace from {namespace_file}, which cannot be read "
                f"({exc.strerror}; not in a pod?): give kube:NAMESPACE/{name}"
            ) from exc
    credentials = KubeCredentials.resolve(api, token_file, ca_file)
    return KubeLeaseStore(KubeApi(credentials, timeout_s), namespace, name)
