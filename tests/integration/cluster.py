"""One name server and two Sync-flush brokers on loopback, and helpers for client tests."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.message.model import Message, StoredMessage

from ..polling import eventually_async
from .processes import ServerProcess, start_server

SMALL_SEGMENTS = """
[store]
commit_log_segment_bytes = 67108864
"""
"""Test brokers roll 64 MiB commit-log segments instead of 1 GiB ones."""


def start_broker(
    namesrv: str,
    name: str,
    store: Path,
    *,
    listen: str = "127.0.0.1:0",
    cluster: str = "test",
    extra: Sequence[str] = (),
    config: str = SMALL_SEGMENTS,
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """A Sync-flush broker; ``extra`` flags are appended, ``config`` is its TOML file, ``env``
    added to its environment."""
    config_file = store.with_name(f"{store.name}.toml")
    config_file.write_text(config)
    return start_server(
        "broker", "--listen", listen, "--namesrv", namesrv, "--store-dir", str(store),
        "--broker-name", name, "--cluster", cluster, "--flush", "Sync",
        "--config", str(config_file), *extra, env=env,
    )  # fmt: skip


def lease(root: Path) -> dict[str, object]:
    """The election record of brokers started with ``--election file:<root>/lease.json``
    ({} before its first write)."""
    try:
        document: dict[str, object] = json.loads((root / "lease.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return document


@dataclass
class Cluster:
    namesrv: ServerProcess
    brokers: dict[str, ServerProcess]
    stores: dict[str, Path]
    extra: Sequence[str] = ()
    """Flags every broker was started with (a restart uses them again)."""
    config: str = SMALL_SEGMENTS

    @property
    def name_servers(self) -> list[str]:
        return [self.namesrv.address]

    def kill(self) -> None:
        """SIGKILL the brokers, stop the name server."""
        for process in self.brokers.values():
            process.kill()
        assert self.namesrv.stop() == 0

    def wait_registered(self, timeout_s: float = 20.0) -> None:
        """Block until every broker has registered with the name server (a broker listens
        before its store has recovered and before it has registered)."""

        async def probe() -> bool:
            async with AdminClient(self.name_servers) as admin:
                registered = {b.name: b.master for b in await admin.brokers()}
            return all(registered.get(n) == p.address for n, p in self.brokers.items())

        asyncio.run(eventually_async(probe, timeout_s, what="brokers registered"))

    def restart(self, name: str) -> ServerProcess:
        """SIGKILL broker ``name`` and start it again on the same address and store."""
        old = self.brokers[name]
        old.kill()
        self.brokers[name] = start_broker(
            self.namesrv.address,
            name,
            self.stores[name],
            listen=old.address,
            extra=self.extra,
            config=self.config,
        )
        return self.brokers[name]


def start_cluster(
    root: Path,
    brokers: Sequence[str] = ("broker-a", "broker-b"),
    *,
    extra: Sequence[str] = (),
    config: str = SMALL_SEGMENTS,
) -> Cluster:
    """A name server and ``brokers``, each started with ``extra`` flags, all registered."""
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    stores = {name: root / name for name in brokers}
    started = Cluster(namesrv, {}, stores, extra, config)
    try:
        for name, store in stores.items():
            started.brokers[name] = start_broker(
                namesrv.address, name, store, extra=extra, config=config
            )
        started.wait_registered()
    except BaseException:
        started.kill()
        raise
    return started


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = start_cluster(tmp_path)
    yield started
    started.kill()


async def create_topic(admin: AdminClient, topic: str, queues_per_broker: int) -> None:
    """Create ``topic`` on both brokers and wait until the name server routes all of it."""
    await admin.create_topic(topic, queues=queues_per_broker)

    async def routed() -> bool:
        route = await admin.route(topic)
        return route is not None and len(route.read_queues) == 2 * queues_per_broker

    await eventually_async(routed, what=f"route of {topic}")


@dataclass
class Collector:
    """A concurrent listener recording what it received (producer ids, in arrival order)."""

    received: list[str] = field(default_factory=list)
    messages: list[StoredMessage] = field(default_factory=list)

    async def __call__(
        self, messages: list[StoredMessage], context: ConcurrentContext
    ) -> ConsumeStatus:
        for message in messages:
            assert message.uniq_key is not None
            self.received.append(message.uniq_key)
            self.messages.append(message)
        return ConsumeStatus.CONSUME_SUCCESS

    def counts(self) -> Counter[str]:
        return Counter(self.received)


async def send_all(
    producer: Producer, messages: Iterable[Message], parallel: int = 64
) -> list[SendResult]:
    """Send concurrently (a Sync-flush broker commits concurrent sends together)."""
    pending = list(messages)
    results: list[SendResult] = []
    for start in range(0, len(pending), parallel):
        chunk = pending[start : start + parallel]
        results.extend(await asyncio.gather(*(producer.send(m) for m in chunk)))
    return results


async def settled(consumers: list[PushConsumer], total_queues: int, timeout_s: float = 20) -> None:
    """Wait until the consumers' assignments are disjoint and cover ``total_queues``."""

    async def probe() -> bool:
        sets = [c.assigned for c in consumers]
        union = frozenset().union(*sets)
        return (
            len(union) == total_queues and sum(len(s) for s in sets) == total_queues and all(sets)
        )

    await eventually_async(probe, timeout_s, what="rebalance settled")
