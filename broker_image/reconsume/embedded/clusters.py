"""BrokerClusters in embedded mode: a name server and brokers as local processes.

A BrokerCluster manifest becomes a name server and one broker per shard,
``<cluster>-broker-<i>`` (the names the operator gives its StatefulSet's pods), with its store
in ``<data>/<namespace>/<cluster>/<broker>/store`` and its settings file beside it: the spec's
delay levels, flush mode and retention, as the operator writes them. Logs go to
``<data>/logs/<namespace>/``. Storage size,
resources and images are Kubernetes matters and ignored. An ``external`` cluster runs nothing:
groups and topics naming it go to its name server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.embedded.processes import Child
from reconsume.errors import ReconsumeError
from reconsume.topology.clusters import ClusterSpec

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 30.0


def settings_toml(spec: ClusterSpec) -> str:
    """The brokers' settings file (the command line adds each broker's name and ports): the
    spec's delay levels, flush mode and retention, as the operator's ConfigMap has them."""
    return "\n".join(
        [
            f"cluster_name = {json.dumps(spec.name)}",
            f"flush_mode = {json.dumps(spec.flush)}",
            f"delay_levels = {json.dumps(spec.delay_levels.strip())}",
            'http_listen = "127.0.0.1:0"',
            # Locally a broker re-registers often, so a restarted name server knows it soon.
            "register_interval_s = 5.0",
            "",
            "[store]",
            f"retention_hours = {spec.retention_hours}",
            "",
        ]
    )


def broker_names(cluster: str, count: int) -> list[str]:
    return [f"{cluster}-broker-{ordinal}" for ordinal in range(count)]


class LocalCluster:
    """The processes of one BrokerCluster (nothing for an external one)."""

    def __init__(self, spec: ClusterSpec, root: Path, logs: Path) -> None:
        self.spec = spec
        self.root = root / spec.name
        self.logs = logs
        self.namesrv: Child | None = None
        self.brokers: dict[str, Child] = {}
        self.problem: str | None = None
        """Why the cluster is not as its spec says (shown in status), or None."""

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

    def _broker(self, name: str) -> Child:
        assert self.namesrv is not None
        assert self.namesrv.address is not None
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        settings = directory / "broker.toml"
        settings.write_text(settings_toml(self.spec))
        return Child(
            name,
            [
                "broker",
                "--config",
                str(settings),
                "--listen",
                "127.0.0.1:0",
                "--namesrv",
                self.namesrv.address,
                "--store-dir",
                str(directory / "store"),
                "--broker-name",
                name,
            ],
            self.logs / f"{name}.log",
        )

    async def scale(self) -> None:
        """Start the brokers the spec asks for that are not running."""
        wanted = broker_names(self.name, self.spec.brokers)
        extra = sorted(set(self.brokers) - set(wanted))
        self.problem = (
            None
            if not extra
            else f"{self.name} runs {len(self.brokers)} brokers, its spec asks for "
            f"{self.spec.brokers}: embedded mode does not scale down (the stores of "
            f"{', '.join(extra)} would go offline); restart reconsume up to do it"
        )
        missing = [name for name in wanted if name not in self.brokers]
        children = [self._broker(name) for name in missing]
        await asyncio.gather(*(child.start() for child in children))
        self.brokers.update(zip(missing, children, strict=True))
        if missing:
            await self.registered()

    async def registered(self, timeout_s: float = REGISTER_TIMEOUT_S) -> None:
        """Wait until the name server lists every running broker (a broker listens before its
        store has recovered and before it has registered); a broker that does not register in
        time is left to the status to show."""
        assert self.name_server is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with AdminClient([self.name_server]) as admin:
            while loop.time() < deadline:
                with contextlib.suppress(ReconsumeError, OSError):
                    known = {b.name for b in await admin.brokers(self.name) if b.master}
                    if set(self.brokers) <= known:
                        return
                await asyncio.sleep(0.1)
        log.warning("%s: not every broker registered within %.0f s", self.name, timeout_s)

    async def update(self, spec: ClusterSpec) -> None:
        """Apply a changed spec: brokers restarted one at a time with new settings, new
        shards started. An external cluster only changes its address."""
        old, self.spec = self.spec, spec
        if spec.external or old.external:
            if spec.external != old.external:
                self.problem = "spec.external cannot change (the API server refuses it too)"
                self.spec = old
            return
        if (old.delay_levels, old.flush, old.retention_hours) != (
            spec.delay_levels,
            spec.flush,
            spec.retention_hours,
        ):
            for name in sorted(self.brokers):
                log.info("restarting broker %s with the new settings", name)
                await self.brokers[name].stop()
                self.brokers[name] = self._broker(name)
                await self.brokers[name].start()
        await self.scale()

    async def supervise(self) -> list[str]:
        """Restart what exited on its own (as Kubernetes restarts a pod's container); what
        happened, for the log."""
        happened = []
        if self.namesrv is not None and not self.namesrv.running:
            happened.append(f"name server of {self.name} exited ({self.namesrv.returncode})")
            # The same port: the brokers (and clients) keep using its address.
            port = int((self.namesrv.address or ":0").rpartition(":")[2])
            restarts = self.namesrv.restarts + 1
            self.namesrv = self._namesrv(port)
            self.namesrv.restarts = restarts
            await self.namesrv.start()
        for name, child in sorted(self.brokers.items()):
            if not child.running:
                happened.append(f"broker {name} exited ({child.returncode}); restarting it")
                replacement = self._broker(name)
                replacement.restarts = child.restarts + 1
                self.brokers[name] = replacement
                await replacement.start()
        return happened

    async def stop(self) -> None:
        """Brokers first (they flush and unregister), then the name server."""
        await asyncio.gather(*(child.stop() for child in self.brokers.values()))
        self.brokers.clear()
        if self.namesrv is not None:
            await self.namesrv.stop()
