"""Embedded mode's reconciler: manifests in, processes and broker configuration out.

Every pass (:meth:`Environment.sync`) reads the manifest files again and makes things match,
as the operator does for objects in the API server:

* BrokerClusters: name server and brokers started (or changed, or stopped);
* Topics and ConsumerGroups: configured on their cluster's brokers through
  :mod:`reconsume.topology.resources`, the operator's own reconcile, with the status it
  reports (ready, reason, retry and dead-letter depths);
* DeadLetterJobs: runs on local Spark (:mod:`reconsume.embedded.jobs`).

What was applied is kept in ``<data>/applied.json``. A manifest that disappears is deleted
under its ``deletionPolicy`` (a refused deletion, e.g. dead letters kept, is retried every
pass and shown). A manifest that becomes invalid, or a file that cannot be read, deletes
nothing: the object stays as it was last applied, and the problem is reported — an edit
refused by the API server changes nothing either.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconsume.client.admin import AdminClient
from reconsume.embedded import manifests as mf
from reconsume.embedded.clusters import LocalCluster
from reconsume.embedded.jobs import JobRunner
from reconsume.embedded.manifests import Key, Manifest
from reconsume.store.atomic import write_atomically
from reconsume.topology import Kind
from reconsume.topology.clusters import ClusterSpec, cluster_spec
from reconsume.topology.jobs import Source
from reconsume.topology.resources import Result, Target, object_name, reconcile, remove

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
APPLIED_FILE = "applied.json"
KINDS = {"ConsumerGroup": Kind.GROUP, "Topic": Kind.TOPIC}


class ManifestsInvalid(Exception):
    """The manifests given at start-up are not all valid: nothing was started."""

    def __init__(self, problems: Sequence[mf.Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = tuple(problems)


@dataclass(slots=True)
class ObjectState:
    """The last reconcile of a Topic or ConsumerGroup."""

    ready: bool = False
    reason: str = "Pending"
    message: str = ""
    status: Mapping[str, Any] = field(default_factory=dict)
    deleting: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready, "reason": self.reason, "message": self.message,
            "status": dict(self.status), "deleting": self.deleting,
        }  # fmt: skip


def _admin(name_server: str) -> AdminClient:
    return AdminClient([a for a in name_server.split(";") if a])


class Environment:
    """Name servers, brokers, topology and dead-letter jobs of a set of manifest paths."""

    def __init__(
        self,
        data_dir: Path,
        paths: Sequence[Path],
        *,
        recursive: bool = False,
        namesrv_port: int = 9876,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.paths = tuple(paths)
        self.recursive = recursive
        self.namesrv_port = namesrv_port
        self.logs = self.data_dir / "logs"
        self.clusters: dict[tuple[str, str], LocalCluster] = {}
        self.applied: dict[Key, Manifest] = {}
        self.objects: dict[Key, ObjectState] = {}
        self.problems: list[str] = []
        self.ignored: list[str] = []
        self.started_at = time.time()
        self.synced_at: float | None = None
        self.jobs = JobRunner(self.data_dir, self._job_source)
        self._removing: dict[Key, Manifest] = {}
        self._lock = asyncio.Lock()
        """One pass at a time (``up``'s loop and the demo's own calls may overlap)."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Check every manifest (raise :class:`ManifestsInvalid`, starting nothing, if one is
        invalid), then start the clusters and apply everything once."""
        async with self._lock:
            await self._start()

    async def _start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        previous = self._read_applied()
        raw = {k: m.body for k, m in previous.items()}
        loaded = mf.load(self.paths, recursive=self.recursive, applied=raw)
        if loaded.problems:
            raise ManifestsInvalid(loaded.problems)
        # Objects applied by an earlier run whose manifests are gone now are deleted (under
        # their deletion policy) once their clusters run.
        current = loaded.by_key()
        self._removing = {k: m for k, m in previous.items() if k not in current}
        self.ignored = loaded.ignored
        await self._apply(current)

    async def sync(self) -> None:
        """One pass: read the files again and make everything match them."""
        async with self._lock:
            await self._sync()

    async def _sync(self) -> None:
        raw = {k: m.body for k, m in self.applied.items()}
        loaded = mf.load(self.paths, recursive=self.recursive, applied=raw)
        problems = [str(p) for p in loaded.problems]
        for problem in problems:
            if problem not in self.problems:  # said once, not every pass
                log.error("%s (the object stays as last applied)", problem)
        self.problems = problems
        self.ignored = loaded.ignored
        wanted = loaded.by_key()
        # What could not be read or checked stays as it was: only what is really gone goes.
        failed_sources = loaded.unreadable | {
            p.source.path if isinstance(p.source, mf.Source) else p.source for p in loaded.problems
        }
        for key, manifest in self.applied.items():
            if key not in wanted and manifest.source.path in failed_sources:
                wanted[key] = manifest
        for key, manifest in self.applied.items():
            if key not in wanted:
                self._removing[key] = manifest
        await self._apply(wanted)

    async def _apply(self, wanted: dict[Key, Manifest]) -> None:
        for key in wanted:
            self._removing.pop(key, None)
        changed = [k for k, m in wanted.items() if self.applied.get(k) is None
                   or self.applied[k].body != m.body]  # fmt: skip
        self.applied = dict(sorted(wanted.items()))
        for key in changed:
            log.info("%s/%s %s", key[0].lower(), key[2], "configured")
        await self._clusters()
        await self._topology()
        await self.jobs.sync(self._of_kind("DeadLetterJob"))
        await self._stop_removed_clusters()
        self._write_applied()
        self.synced_at = time.time()
        self.write_state()

    async def supervise(self) -> None:
        """Restart processes that exited on their own."""
        async with self._lock:
            for cluster in self.clusters.values():
                for happened in await cluster.supervise():
                    log.warning("%s", happened)

    async def stop(self) -> None:
        """Stop job runs, then brokers, then name servers; the state file says so."""
        async with self._lock:
            await self.jobs.stop()
            for cluster in self.clusters.values():
                await cluster.stop()
            if self.data_dir.is_dir():  # not when start failed to create it
                self.write_state(running=False)

    # ------------------------------------------------------------------ clusters
    def _of_kind(self, kind: str) -> dict[Key, Manifest]:
        return {k: m for k, m in self.applied.items() if k[0] == kind}

    async def _clusters(self) -> None:
        wanted = {(m.namespace, m.name): cluster_spec(m.body)
                  for m in self._of_kind("BrokerCluster").values()}  # fmt: skip
        for key, spec in sorted(wanted.items()):
            cluster = self.clusters.get(key)
            if cluster is None:
                await self._start_cluster(key, spec)
            elif cluster.spec != spec:
                await cluster.update(spec)

    async def _stop_removed_clusters(self) -> None:
        """After the topology pass, so that groups and topics deleted with their cluster are
        deleted from its brokers first."""
        wanted = {(m.namespace, m.name) for m in self._of_kind("BrokerCluster").values()}
        for key in sorted(set(self.clusters) - wanted):
            log.info("brokercluster/%s deleted: stopping its processes (its data stays)", key[1])
            await self.clusters.pop(key).stop()

    async def _start_cluster(self, key: tuple[str, str], spec: ClusterSpec) -> None:
        local = [k for k, c in self.clusters.items() if not c.spec.external]
        # The first cluster's name server listens on the well-known port; others on any.
        port = self.namesrv_port if not local and not spec.external else 0
        cluster = LocalCluster(spec, self.data_dir / key[0], self.logs / key[0])
        await cluster.start(port)
        self.clusters[key] = cluster
        if not spec.external:
            log.info("brokercluster/%s: name server %s, brokers %s", spec.name,
                     cluster.name_server, cluster.describe_brokers())  # fmt: skip

    def target(self, manifest: Manifest) -> Target | str:
        """Where a Topic's or ConsumerGroup's cluster is, or why it is unknown."""
        name = str(manifest.spec.get("cluster") or "")
        cluster = self.clusters.get((manifest.namespace, name))
        if cluster is None or cluster.name_server is None:
            return f"BrokerCluster {name} is not declared in the manifests"
        return Target(cluster.name_server, cluster.spec.rocketmq_cluster)

    # ------------------------------------------------------------------ topology
    async def _topology(self) -> None:
        for key in sorted(set(self.objects) - set(self.applied) - set(self._removing)):
            del self.objects[key]
        # Topics before groups (as kubectl applies a directory in name order, it does not
        # matter for correctness: a group's subscriptions do not need the topic).
        for kind in ("Topic", "ConsumerGroup"):
            for key, manifest in self._of_kind(kind).items():
                self.objects[key] = await self._reconcile(manifest)
        for key, manifest in sorted(self._removing.items()):
            if key[0] not in KINDS:
                self._removing.pop(key)
                continue
            state = await self._remove(manifest)
            if state is None:
                self._removing.pop(key)
                self.objects.pop(key, None)
            else:
                self.objects[key] = state

    async def _reconcile(self, manifest: Manifest) -> ObjectState:
        target = self.target(manifest)
        if isinstance(target, str):
            return ObjectState(False, "ClusterNotFound", target)
        result = await reconcile(KINDS[manifest.kind], manifest.body, target, _admin)
        for change in result.changes:
            log.info("%s: %s", manifest.describe(), change)
        return _state(result)

    async def _remove(self, manifest: Manifest) -> ObjectState | None:
        """Delete under the deletion policy; None once done, else why not yet."""
        target = self.target(manifest)
        if isinstance(target, str):
            log.warning(
                "%s: deleted; its cluster is gone, nothing to clean up", manifest.describe()
            )
            return None
        result = await remove(KINDS[manifest.kind], manifest.body, target, _admin)
        for change in result.changes:
            log.info("%s: %s", manifest.describe(), change)
        if result.ready:
            log.info("%s deleted: %s", manifest.describe(), result.message)
            return None
        state = _state(result)
        state.deleting = True
        return state

    # ------------------------------------------------------------------ jobs
    def _job_source(self, manifest: Manifest) -> Source | str:
        group_ref = str(manifest.spec.get("consumerGroup") or "")
        group = self.applied.get(("ConsumerGroup", manifest.namespace, group_ref))
        if group is None:
            return f"spec.consumerGroup: ConsumerGroup {group_ref} is not declared in the manifests"
        target = self.target(group)
        if isinstance(target, str):
            return target
        return Source(target.name_server, object_name(Kind.GROUP, group.body))

    # ------------------------------------------------------------------ persistence
    def _read_applied(self) -> dict[Key, Manifest]:
        path = self.data_dir / APPLIED_FILE
        if not path.exists():
            return {}
        applied = {}
        for item in json.loads(path.read_text()):
            manifest = Manifest(mf.Source(Path(item["source"])), item["body"])
            applied[manifest.key] = manifest
        return applied

    def _write_applied(self) -> None:
        kept = {**self._removing, **self.applied}
        data = [{"source": str(m.source.path), "body": m.body} for _, m in sorted(kept.items())]
        _write_json(self.data_dir / APPLIED_FILE, data)

    def state(self, *, running: bool = True) -> dict[str, Any]:
        """What ``reconsume status`` shows."""
        clusters = []
        for (namespace, name), cluster in sorted(self.clusters.items()):
            masters = cluster.masters()
            clusters.append({
                "namespace": namespace, "name": name, "external": cluster.spec.external,
                "nameServer": cluster.name_server, "problem": cluster.problem,
                "replicas": cluster.spec.replicas, "replication": cluster.spec.replication,
                "brokers": [
                    {"name": n, "broker": cluster.processes[n].broker, "master": n in masters,
                     "address": c.address, "http": c.http_address, "grpc": c.grpc_address,
                     "running": c.running,
                     "restarts": c.restarts}
                    for n, c in cluster.ordered()
                ],
            })  # fmt: skip
        objects = []
        for key, state in sorted(self.objects.items()):
            manifest = self.applied.get(key) or self._removing.get(key)
            objects.append({
                "kind": key[0], "namespace": key[1], "name": key[2],
                "cluster": None if manifest is None else manifest.spec.get("cluster"),
                "source": None if manifest is None else str(manifest.source),
                **state.to_json(),
            })  # fmt: skip
        return {
            "running": running, "pid": os.getpid(), "dataDir": str(self.data_dir),
            "paths": [str(p) for p in self.paths], "startedAt": self.started_at,
            "syncedAt": self.synced_at, "clusters": clusters, "objects": objects,
            "jobs": [s.to_json() for _, s in sorted(self.jobs.states.items())],
            "problems": self.problems, "ignored": self.ignored,
        }  # fmt: skip

    def write_state(self, *, running: bool = True) -> None:
        _write_json(self.data_dir / STATE_FILE, self.state(running=running))


def _state(result: Result) -> ObjectState:
    return ObjectState(result.ready, result.reason, result.message, result.status)


def _write_json(path: Path, data: Any) -> None:
    """Replace the file atomically and durably (the store's one atomic write): a crash of
    the machine leaves the previous state, never an empty or torn file."""
    write_atomically(path, json.dumps(data, indent=1, default=str).encode())
