"""Failover time: from SIGKILL of a master to the first acknowledged send on its successor.

    python -m bench.failover --kills 20 --write-json bench/out/failover.json

Real ``reconsume namesrv`` and three ``reconsume broker`` processes of one broker name on
127.0.0.1 (64 MiB segments, Sync flush, Sync replication, ``--election file:…``). One producer
in this process sends one message at a time, each until it is acknowledged (a refused or
timed-out send is sent again). Each round waits until both replicas are listed in sync, kills
the master with SIGKILL, records when the first send started after the kill is acknowledged,
and starts the killed broker again (it rejoins as a replica). At the end every acknowledged
message is looked up in each broker's store by its id.

Results (JSON): failover seconds per kill and their p50 / p99 / max, sends acknowledged and
sends lost (acknowledged but in no store), per lease duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_OUT, data_dir, machine_info, write_json
from bench.delay_lateness import percentiles
from bench.servers import SMALL_SEGMENTS, Server, start_server
from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.decode import decode_record
from reconsume.message.model import Message
from reconsume.store import MessageStore

NAME = "bench-failover"
TOPIC = "failover"


class Brokers:
    def __init__(self, root: Path, namesrv: str, lease_ms: int) -> None:
        self.root = root
        self.namesrv = namesrv
        self.lease_ms = lease_ms
        self.config = root / "broker.toml"
        self.config.write_text(SMALL_SEGMENTS)
        self.running: dict[int, Server] = {}

    def start(self, index: int) -> None:
        self.running[index] = start_server(
            "broker", "--listen", "127.0.0.1:0", "--namesrv", self.namesrv,
            "--store-dir", str(self.root / f"b{index}"), "--broker-name", NAME,
            "--flush", "Sync", "--replication", "Sync", "--config", str(self.config),
            "--election", f"file:{self.root / 'lease.json'}", "--broker-id", str(index),
            "--lease-duration-ms", str(self.lease_ms), "--replica-lag-max-ms", "1000",
        )  # fmt: skip

    def lease(self) -> dict[str, Any]:
        try:
            document: dict[str, Any] = json.loads((self.root / "lease.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return document

    def master(self) -> int | None:
        holder = self.lease().get("holder")
        return None if holder is None else int(str(holder).rsplit("-", 1)[1])

    def stop(self) -> None:
        for server in self.running.values():
            server.stop()


async def wait_for(probe: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.05)


async def send_until_acked(producer: Producer, body: bytes) -> str:
    while True:
        try:
            return (await producer.send(Message(TOPIC, body))).msg_id
        except ReconsumeError:
            await asyncio.sleep(0.02)


async def rounds(brokers: Brokers, kills: int) -> dict[str, Any]:
    acked: list[str] = []
    failovers: list[float] = []
    async with Producer([brokers.namesrv], send_timeout_s=1.0) as producer:
        acked += [await send_until_acked(producer, b"warm-up") for _ in range(20)]
        for kill in range(kills):
            others = {i for i in brokers.running if i != brokers.master()}
            wanted = sorted(f"{NAME}-{i}" for i in others)
            await wait_for(
                lambda w=wanted: sorted(brokers.lease().get("in_sync", [])) == w,
                60,
                "replicas in sync",
            )
            acked += [await send_until_acked(producer, f"r{kill}-{i}".encode()) for i in range(10)]
            victim = brokers.master()
            assert victim is not None
            killed_at = time.monotonic()
            brokers.running[victim].process.send_signal(signal.SIGKILL)
            brokers.running[victim].process.wait()
            acked.append(await send_until_acked(producer, f"after-kill-{kill}".encode()))
            failovers.append(time.monotonic() - killed_at)
            print(f"kill {kill + 1}: failover {failovers[-1]:.2f} s", file=sys.stderr)
            brokers.start(victim)
    return {"acked": acked, "failover_s": failovers}


def lost(root: Path, acked: list[str]) -> dict[str, int]:
    """Acknowledged ids missing from each store."""
    missing: dict[str, int] = {}
    for store_dir in sorted(root.glob("b[0-9]")):
        with MessageStore(store_dir, background=False) as store:
            ids: set[str] = set()
            for queue in store.queues.of_topic(TOPIC):
                for phys, size, _tag in queue.entries(queue.min_offset, 1 << 30):
                    record = store.commitlog.read(phys, size)
                    if record is not None:
                        ids.add(str(decode_record(record).uniq_key))
            missing[store_dir.name] = len(set(acked) - ids)
    return missing


def run(kills: int, lease_ms: int) -> dict[str, Any]:
    with data_dir(DEFAULT_OUT / "data", "failover") as root:
        namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
        brokers = Brokers(root, namesrv.address, lease_ms)
        try:
            for index in range(3):
                brokers.start(index)
            result = asyncio.run(rounds(brokers, kills))
        finally:
            brokers.stop()
            namesrv.stop()
        return {
            "lease_ms": lease_ms,
            "kills": kills,
            "failover_s": percentiles(result["failover_s"]),
            "per_kill_s": [round(s, 2) for s in result["failover_s"]],
            "acked": len(result["acked"]),
            "lost_per_store": lost(root, result["acked"]),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lease-ms", default="3000,5000", help="comma-separated lease durations")
    parser.add_argument("--write-json", type=Path, default=DEFAULT_OUT / "failover.json")
    args = parser.parse_args(argv)
    results = [run(args.kills, int(ms)) for ms in args.lease_ms.split(",")]
    document = {"machine": machine_info(DEFAULT_OUT / "data"), "results": results}
    write_json(args.write_json, document)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
