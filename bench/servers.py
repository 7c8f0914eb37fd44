"""A name server and one broker (or a master and its replica) as real ``reconsume`` processes
on 127.0.0.1, for the client benchmarks (as ``tests/integration/cluster.py`` starts them, 64 MiB
commit-log segments).

    with servers(data_root, "Async") as running:
        running.namesrv, running.broker.pid
    with replicated_servers(data_root, "Sync") as running:   # a master and one Sync replica
        running.broker.pid, running.replicas[0].pid
    with servers(data_root, "Async", grpc=True) as running:  # also RocketMQ 5's gRPC protocol
        running.grpc                                         # "127.0.0.1:PORT"

The store directory is created under ``data_root`` and removed when the servers stop.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import data_dir
from reconsume.client.admin import AdminClient

RECONSUME = str(Path(sys.executable).with_name("reconsume"))
SEGMENT_BYTES = 64 * 1024 * 1024
SMALL_SEGMENTS = f"[store]\ncommit_log_segment_bytes = {SEGMENT_BYTES}\n"
"""64 MiB commit-log segments instead of 1 GiB: the disk is shared."""
BROKER_NAME = "bench-broker"
_LISTENING = re.compile(r"listening on (\S+)")
_SERVING_GRPC = re.compile(r"serving gRPC on (\S+)")
GRPC_ARGS = ("--grpc-listen", "127.0.0.1:0")
"""A broker's flags for its gRPC endpoint (RocketMQ 5's clients) on a free port of 127.0.0.1."""
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    process: subprocess.Popen[str]
    address: str
    output: list[str]

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(
    *args: str, timeout_s: float = 30.0, env: Mapping[str, str] | None = None
) -> Server:
    """Run ``reconsume <args>`` (``env`` added to the environment) and wait for its "listening
    on" line."""
    process = subprocess.Popen(
        [RECONSUME, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # keeps reading, so a chatty server never blocks on a full pipe
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = _LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(timeout_s)
    if not found:
        process.kill()
        process.wait()
        raise RuntimeError(f"reconsume {' '.join(args)} did not start: {''.join(lines)}")
    return Server(process, found[0], lines)


def start_namesrv(*args: str) -> Server:
    """``reconsume namesrv`` on a free port of 127.0.0.1, ``args`` its other flags."""
    return start_server("namesrv", "--listen", "127.0.0.1:0", *args)


def start_broker(
    namesrv: str,
    store: Path,
    config: Path,
    name: str,
    *args: str,
    env: Mapping[str, str] | None = None,
) -> Server:
    """``reconsume broker`` named ``name`` on a free port of 127.0.0.1, registering with
    ``namesrv``, its store in ``store``, its settings file ``config``, ``args`` its other flags,
    ``env`` added to its environment."""
    return start_server(
        "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv, "--store-dir", str(store),
        "--broker-name", name, "--config", str(config), *args, env=env,
    )  # fmt: skip


def small_segments_config(directory: Path) -> Path:
    """``directory/broker.toml`` holding :data:`SMALL_SEGMENTS`."""
    config = directory / "broker.toml"
    config.write_text(SMALL_SEGMENTS)
    return config


@dataclass(frozen=True)
class Running:
    namesrv: str
    broker: Server
    flush_mode: str
    store: Path
    """The broker's store directory (removed when the servers stop)."""
    replicas: tuple[Server, ...] = ()
    """Brokers of the same name following ``broker`` (none for a lone broker)."""
    grpc: str = ""
    """The broker's gRPC endpoint, ``127.0.0.1:PORT`` (``servers(..., grpc=True)``; else "")."""


def grpc_address(server: Server) -> str:
    """The gRPC endpoint a broker started with ``--grpc-listen`` printed ("serving gRPC on
    HOST:PORT", before its "listening on" line)."""
    for line in server.output:
        match = _SERVING_GRPC.search(line)
        if match:
            return match.group(1)
    raise RuntimeError(f"the broker printed no gRPC endpoint: {''.join(server.output)}")


@contextmanager
def servers(
    data_root: Path,
    flush_mode: str,
    *broker_args: str,
    name: str = "client",
    namesrv_args: tuple[str, ...] = (),
    broker_env: Mapping[str, str] | None = None,
    grpc: bool = False,
) -> Iterator[Running]:
    """A name server (``namesrv_args``) and one broker (``--flush flush_mode`` and
    ``broker_args``, ``broker_env`` added to its environment; with ``grpc`` also
    :data:`GRPC_ARGS`, its endpoint ``running.grpc``) with a fresh store under
    ``data_root/<name>-<flush mode>``."""
    with ExitStack() as stack:
        directory = stack.enter_context(data_dir(data_root, f"{name}-{flush_mode.lower()}"))
        config = small_segments_config(directory)
        namesrv = start_namesrv(*namesrv_args)
        stack.callback(namesrv.stop)
        broker = start_broker(
            namesrv.address, directory / "store", config, BROKER_NAME,
            "--cluster", "bench", "--flush", flush_mode, *broker_args,
            *(GRPC_ARGS if grpc else ()), env=broker_env,
        )  # fmt: skip
        stack.callback(broker.stop)
        endpoint = grpc_address(broker) if grpc else ""
        yield Running(namesrv.address, broker, flush_mode, directory / "store", grpc=endpoint)


REPLICATION_ARGS = ("--replication", "Sync")
"""The master's flags beside ``broker_args`` in :func:`replicated_servers`."""


@contextmanager
def replicated_servers(
    data_root: Path,
    flush_mode: str,
    *broker_args: str,
    name: str = "replicated",
    replica_flush: str | None = None,
) -> Iterator[Running]:
    """A name server, a master (``--replication Sync``) and one replica of it (``--broker-id 1
    --master MASTER``), both ``--flush flush_mode`` (the replica ``replica_flush`` if given) and
    ``broker_args``, with fresh stores under ``data_root/<name>-<flush mode>``; the replica is
    ``running.replicas[0]``. It may still be catching up when this yields: until it is in sync,
    sends are answered SLAVE_NOT_AVAILABLE (the load generator's ``setup --replicas 2
    --probe-topic T`` waits for that)."""
    with ExitStack() as stack:
        directory = stack.enter_context(data_dir(data_root, f"{name}-{flush_mode.lower()}"))
        config = small_segments_config(directory)
        namesrv = start_namesrv()
        stack.callback(namesrv.stop)
        common = ("--cluster", "bench", *broker_args)
        master = start_broker(
            namesrv.address, directory / "store", config, BROKER_NAME, *common,
            "--flush", flush_mode, *REPLICATION_ARGS,
        )  # fmt: skip
        stack.callback(master.stop)
        replica = start_broker(
            namesrv.address, directory / "replica", config, BROKER_NAME, *common,
            "--flush", replica_flush or flush_mode, "--broker-id", "1", "--master", master.address,
        )  # fmt: skip
        stack.callback(replica.stop)
        yield Running(namesrv.address, master, flush_mode, directory / "store", (replica,))


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far (from /proc; 0 if unreadable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0, 0.0
    fields = stat.rpartition(")")[2].split()
    return int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (from /proc; 0 if unreadable)."""
    return sum(cpu_times(pid))


async def create_topic(namesrv: str, topic: str, queues: int, timeout_s: float = 30.0) -> None:
    """Create ``topic`` on the broker and wait until the name server routes all its queues."""
    deadline = time.monotonic() + timeout_s
    async with AdminClient([namesrv]) as admin:
        while not await admin.brokers():  # the broker registers just after it listens
            if time.monotonic() > deadline:
                raise TimeoutError(f"no broker registered with {namesrv} in {timeout_s:g}s")
            await asyncio.sleep(0.02)
        await admin.create_topic(topic, queues=queues)
        while True:
            route = await admin.route(topic)
            if route is not None and len(route.read_queues) == queues:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not routed with {queues} queues in {timeout_s:g}s")
            await asyncio.sleep(0.02)
