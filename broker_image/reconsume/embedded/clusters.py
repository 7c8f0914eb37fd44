"""BrokerClusters in embedded mode: a name server and brokers as local processes.

A BrokerCluster manifest becomes a name server and one broker per shard,
``<cluster>-broker-<i>`` (the names the operator gives its StatefulSet's pods), with its store
in ``<data>/<namespace>/<cluster>/<broker>/store`` and its settings file beside it: the spec's
delay levels, flush mode and retention, as the operator writes them. With ``spec.replicas``
above 1 each shard also runs its replicas, which elect the shard's master
(:mod:`reconsume.embedded.brokers`). Logs go to ``<data>/logs/<namespace>/``. Storage size,
resources and images are Kubernetes matters and ignored. An ``external`` cluster runs nothing:
groups and topics naming it go to its name server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from reconsume.client.admin import AdminClient, BrokerInfo
from reconsume.embedded.brokers import (
    LEASE_DURATION_MS,
    SETTINGS_FILE,
    BrokerProcess,
    broker_args,
    broker_names,
    broker_processes,
    in_sync,
    masters,
    seed_lease,
)
from reconsume.embedded.processes import Child
from reconsume.errors import ReconsumeError
from reconsume.topology.clusters import ClusterSpec

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 30.0
TAKEOVER_WAIT_S = 2 * LEASE_DURATION_MS / 1000
"""How long a dead master whose lease no replica has taken yet waits before it is restarted
(it then takes its lease back): a replica takes an expired one within 1.2 lease durations."""


def settings_toml(spec: ClusterSpec) -> str:
    """The brokers' settings file (the command line adds each broker's name and ports): the
    spec's delay levels, flush mode and retention, as the operator's ConfigMap has them."""
    return "\n".join(
        [
            f"cluster_name = {json.dumps(spec.name)}",
            f"flush_mode = {json.dumps(spec.flush)}",
            f"delay_levels = {json.dumps(spec.delay_levels.strip())}",
            'http_listen = "127.0.0.1:0"',
            'grpc_listen = "127.0.0.1:0"',
            # Locally a broker re-registers often, so a restarted name server knows it soon.
            "register_interval_s = 5.0",
            "",
            "[store]",
            f"retention_hours = {spec.retention_hours}",
            "",
        ]
    )


class LocalCluster:
    """The processes of one BrokerCluster (nothing for an external one)."""

    def __init__(self, spec: ClusterSpec, root: Path, logs: Path) -> None:
        self.spec = spec
        self.root = root / spec.name
        self.logs = logs
        self.namesrv: Child | None = None
        self.brokers: dict[str, Child] = {}
        """The broker processes by name (replicas included)."""
        self.processes: dict[str, BrokerProcess] = {}
        """What each of :attr:`brokers` is: its broker name and index."""
        self.problem: str | None = None
        """Why the cluster is not as its spec says (shown in status), or None."""
        self._dead_since: dict[str, float] = {}
        """Dead masters waiting for a replica to take their lease over."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def name_server(self) -> str | None:
        """Where clients find its brokers; None until its name server listens."""
        if self.spec.external_name_server is not None:
            return self.spec.external_name_server
        return None if self.namesrv is None else self.namesrv.address

    def broker_http(self) -> dict[str, str]:
        """Each running broker's HTTP endpoint (``/metrics``)."""
        return {n: c.http_address for n, c in self.brokers.items() if c.http_address}

    def masters(self) -> set[str]:
        """The processes that are their broker's master now (with replicas: by its lease)."""
        return masters(self.spec, self.root, self.processes.values())

    def ordered(self) -> list[tuple[str, Child]]:
        """The broker processes broker by broker, each broker's index 0 first."""
        return [(p.name, self.brokers[p.name]) for p in sorted(self.processes.values())]

    def describe_brokers(self) -> str:
        """Each broker process with its address and, with replicas, whether it is master."""
        current = self.masters()
        roles = {n: (" (master)" if n in current else " (replica)") if self.spec.replicated
                 else "" for n in self.brokers}  # fmt: skip
        return ", ".join(f"{n} {c.address}{roles[n]}" for n, c in self.ordered())

    async def start(self, namesrv_port: int = 0) -> None:
        """Start the name server (on ``namesrv_port``, 0: any free one), then the brokers."""
        if self.spec.external:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.namesrv = self._namesrv(namesrv_port)
        await self.namesrv.start()
        await self.scale()

    def _namesrv(self, port: int) -> Child:
        return Child(
            f"{self.name}-namesrv",
            # Brokers re-register every 5 s here; one gone for 30 s leaves the routes.
            [
                "namesrv",
                "--listen",
                f"127.0.0.1:{port}",
                "--broker-expiry-s",
                "30",
                "--scan-interval-s",
                "5",
            ],
            self.logs / f"{self.name}-namesrv.log",
        )

    def _broker(self, process: BrokerProcess) -> Child:
        directory = self.root / process.name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / SETTINGS_FILE).write_text(settings_toml(self.spec))
        return Child(process.name, self._args(process), self.logs / f"{process.name}.log")

    def _args(self, process: BrokerProcess) -> list[str]:
        assert self.namesrv is not None
        assert self.namesrv.address is not None
        return broker_args(self.spec, process, self.root, self.namesrv.address)

    async def scale(self) -> None:
        """Start the brokers and replicas the spec asks for that are not running; stop the
        replicas it no longer asks for (their stores stay)."""
        wanted = {p.name: p for p in broker_processes(self.spec)}
        shards = set(broker_names(self.name, self.spec.brokers))
        running = {p.broker for p in self.processes.values()}
        extra = sorted(running - shards)
        self.problem = (
            None
            if not extra
            else f"{self.name} runs {len(running)} brokers, its spec asks for "
            f"{self.spec.brokers}: embedded mode does not scale down (the stores of "
            f"{', '.join(extra)} would go offline); restart reconsume up to do it"
        )
        await self._stop([n for n, p in self.processes.items()
                          if p.broker in shards and n not in wanted])  # fmt: skip
        missing = [p for name, p in wanted.items() if name not in self.brokers]
        if self.spec.replicated:
            for broker in sorted(
                {p.broker for p in missing} - {p.broker for p in self.processes.values()}
            ):
                await seed_lease(self.root, broker)
        children = [self._broker(process) for process in missing]
        await asyncio.gather(*(child.start() for child in children))
        for process, child in zip(missing, children, strict=True):
            self.brokers[process.name] = child
            self.processes[process.name] = process
        if missing:
            await self.registered()

    def _registered(self, listed: Iterable[BrokerInfo]) -> bool:
        """Whether the name server routes every running process's broker to a master and
        lists every running process, and every running replica is in sync."""
        by_name = {b.name: b for b in listed}
        running = [p for n, p in self.processes.items() if self.brokers[n].running]
        for process in running:
            info = by_name.get(process.broker)
            if info is None or info.master is None:
                return False
            if self.brokers[process.name].address not in info.addresses.values():
                return False
        return in_sync(self.spec, self.root, running)

    async def registered(self, timeout_s: float = REGISTER_TIMEOUT_S) -> None:
        """Wait until the name server lists every running broker (a broker listens before its
        store has recovered and before it has registered) and, with replicas, each master
        counts its replicas in sync (under Sync replication sends need them); a broker that
        does not get there in time is left to the status to show."""
        assert self.name_server is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with AdminClient([self.name_server]) as admin:
            while loop.time() < deadline:
                with contextlib.suppress(ReconsumeError, OSError):
                    if self._registered(await admin.brokers(self.name)):
                        return
                await asyncio.sleep(0.1)
        log.warning("%s: not every broker registered within %.0f s", self.name, timeout_s)

    async def update(self, spec: ClusterSpec) -> None:
        """Apply a changed spec: replicas no longer asked for stopped, brokers whose settings
        or command line changed restarted one at a time (replicas before masters, each back
        in sync before the next), new brokers and replicas started. An external cluster only
        changes its address."""
        old, self.spec = self.spec, spec
        if spec.external or old.external:
            if spec.external != old.external:
                self.problem = "spec.external cannot change (the API server refuses it too)"
                self.spec = old
            return
        shards = set(broker_names(self.name, spec.brokers))
        wanted = {p.name: p for p in broker_processes(spec)}
        # First the replicas no longer asked for: the others may then run without election.
        await self._stop([n for n, p in self.processes.items()
                          if p.broker in shards and n not in wanted])  # fmt: skip
        if spec.replicated and not old.replicated:
            for broker in sorted(shards & {p.broker for p in self.processes.values()}):
                await seed_lease(self.root, broker)
        changed = settings_toml(old) != settings_toml(spec)
        stale = [n for n, p in self.processes.items() if n in wanted
                 and (changed or self.brokers[n].args != tuple(self._args(p)))]  # fmt: skip
        current = self.masters()
        for name in sorted(stale, key=lambda n: (n in current, n)):
            log.info("restarting broker %s with the new settings", name)
            await self.brokers[name].stop()
            self.brokers[name] = self._broker(self.processes[name])
            await self.brokers[name].start()
            await self.registered()
        await self.scale()

    async def supervise(self) -> list[str]:
        """Restart what exited on its own (as Kubernetes restarts a pod's container); what
        happened, for the log. A master that exited while another process of its broker runs
        is restarted once that one has taken its lease over (or after
        :data:`TAKEOVER_WAIT_S`): it comes back as a replica, as a lost pod does."""
        happened = []
        if self.namesrv is not None and not self.namesrv.running:
            happened.append(f"name server of {self.name} exited ({self.namesrv.returncode})")
            # The same port: the brokers (and clients) keep using its address.
            port = int((self.namesrv.address or ":0").rpartition(":")[2])
            restarts = self.namesrv.restarts + 1
            self.namesrv = self._namesrv(port)
            self.namesrv.restarts = restarts
            await self.namesrv.start()
        current = self.masters() if self.spec.replicated else set()
        now = time.monotonic()
        for name, child in sorted(self.brokers.items()):
            if child.running:
                continue
            if name in current and self._others_run(name):
                if name not in self._dead_since:
                    self._dead_since[name] = now
                    happened.append(
                        f"broker {name}, master of {self.processes[name].broker}, exited "
                        f"({child.returncode}); a replica takes over, then it restarts"
                    )
                if now - self._dead_since[name] < TAKEOVER_WAIT_S:
                    continue
            if self._dead_since.pop(name, None) is None:
                happened.append(f"broker {name} exited ({child.returncode}); restarting it")
            elif name in current:
                happened.append(
                    f"broker {name} restarting: no replica took its lease over within "
                    f"{TAKEOVER_WAIT_S:g} s"
                )
            else:
                happened.append(f"broker {name} restarting, to rejoin as a replica")
            replacement = self._broker(self.processes[name])
            replacement.restarts = child.restarts + 1
            self.brokers[name] = replacement
            await replacement.start()
        return happened

    def _others_run(self, name: str) -> bool:
        """Whether another process of ``name``'s broker runs."""
        broker = self.processes[name].broker
        return any(p.broker == broker and n != name and self.brokers[n].running
                   for n, p in self.processes.items())  # fmt: skip

    async def _stop(self, names: Iterable[str]) -> None:
        """Stop these broker processes: replicas first, then masters (which hand their lease
        over to an in-sync replica still running, if any)."""
        names = list(names)
        current = self.masters()
        for batch in ([n for n in names if n not in current], [n for n in names if n in current]):
            await asyncio.gather(*(self.brokers[n].stop() for n in batch))
            for name in batch:
                del self.brokers[name]
                del self.processes[name]
                self._dead_since.pop(name, None)

    async def stop(self) -> None:
        """Brokers first (they flush and unregister; replicas before masters), then the name
        server."""
        await self._stop(list(self.brokers))
        if self.namesrv is not None:
            await self.namesrv.stop()
