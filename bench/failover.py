"""Failover time: from SIGKILL of a master to the first acknowledged send on its successor.

    python -m bench.failover --kills 20 --write-json bench/out/failover.json
    python -m bench.failover --kills 20 --lease-ms 3000 --systems reconsume,rocketmq

Real ``reconsume namesrv`` and three ``reconsume broker`` processes of one broker name on
127.0.0.1 (64 MiB segments, Sync flush, Sync replication, ``--election file:…``). One producer
in this process sends one message at a time, each until it is acknowledged (a refused or
timed-out send is sent again). Each round waits until both replicas are listed in sync, kills
the master with SIGKILL, records when the first send started after the kill is acknowledged,
and starts the killed broker again (it rejoins as a replica). At the end, once the last one is
listed in sync again, every acknowledged message is looked up in each broker's store by its id.

With ``--systems …,rocketmq`` the same rounds run against Apache RocketMQ 5.3 in controller
mode (``RocketMQBrokers``): a name server, one standalone controller (DLedger, one peer) and
three brokers of one brokerName with ``enableControllerMode`` and ``allAckInSyncStateSet`` (a
send is answered once every broker of the SyncStateSet has it), the flush mode as above. The
controller elects the master and hands out broker ids; a round waits until
``mqadmin getSyncStateSet`` lists all three brokers in sync and alive, kills the master it names,
and measures with the same producer (reconsume's client, which reads the route again after a
failed send). The killed broker is started again on its store (it rejoins as a slave). At the
end every acknowledged message is looked up on each broker by pulling the topic's queues (the
brokers run with ``slaveReadEnable=true`` for that: 5.x slaves refuse pulls otherwise).

Results (JSON): failover seconds per kill and their p50 / p99 / max, sends acknowledged and
sends lost (acknowledged but in no store), per system and lease duration (reconsume) or
controller heartbeat timeout (Apache RocketMQ).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench import rocketmq_servers
from bench.common import (
    DEFAULT_OUT,
    data_dir,
    loadavg,
    machine_info,
    warn_if_plain_interpreter,
    write_json,
)
from bench.delay_lateness import percentiles
from bench.servers import Server, small_segments_config, start_broker, start_namesrv
from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.client.pull import pull_once
from reconsume.errors import ReconsumeError
from reconsume.message.decode import decode_record
from reconsume.message.model import Message
from reconsume.store import MessageStore

NAME = "bench-failover"
TOPIC = "failover"
SYSTEMS = ("reconsume", "rocketmq")
BROKERS = 3


class Brokers:
    def __init__(self, root: Path, namesrv: str, lease_ms: int) -> None:
        self.root = root
        self.namesrv = namesrv
        self.lease_ms = lease_ms
        self.config = small_segments_config(root)
        self.running: dict[int, Server] = {}

    def start(self, index: int) -> None:
        self.running[index] = start_broker(
            self.namesrv, self.root / f"b{index}", self.config, NAME,
            "--flush", "Sync", "--replication", "Sync",
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

    async def all_in_sync(self) -> bool:
        """The lease lists every running broker but the master as in sync."""
        others = {i for i in self.running if i != self.master()}
        return sorted(self.lease().get("in_sync", [])) == sorted(f"{NAME}-{i}" for i in others)

    def stop(self) -> None:
        for server in self.running.values():
            server.stop()


_IN_SYNC_ALIVE = re.compile(
    r"^InSyncReplica:\s+ReplicaIdentity\{[^}]*brokerAddress='([^']+)', alive=true", re.MULTILINE
)
"""A member of the SyncStateSet that the controller sees alive, in ``getSyncStateSet``'s
output (which lists the brokers out of the set as ``OutOfSyncReplica``)."""


class RocketMQBrokers:
    """Apache RocketMQ in controller mode: a name server, a standalone controller and
    ``BROKERS`` brokers of one brokerName (``rocketmq_servers.controller_broker_conf``), each
    broker with its store and logs under ``root/b<index>``."""

    def __init__(self, root: Path, heartbeat_timeout_ms: int | None) -> None:
        self.root = root
        namesrv_port, self.controller_port, *self.ports = rocketmq_servers.free_ports(BROKERS + 1)
        # slaveReadEnable: slaves answer pulls too (5.x refuses them otherwise), so the check
        # at the end can read every broker's copy; it changes nothing on the send path.
        self.extra = ("slaveReadEnable=true",) + (
            () if heartbeat_timeout_ms is None
            else (f"controllerHeartBeatTimeoutMills={heartbeat_timeout_ms}",)
        )  # fmt: skip
        self.servers: list[Server] = []
        self.running: dict[int, Server] = {}
        self.namesrv_port = namesrv_port
        self.namesrv = f"127.0.0.1:{namesrv_port}"
        self.master_address: str | None = None

    def start_controller(self) -> None:
        """The name server and the controller (before any broker)."""
        self.servers.append(rocketmq_servers.start_namesrv(self.root, self.namesrv_port))
        self.servers.append(rocketmq_servers.start_controller(self.root, self.controller_port))

    def start(self, index: int) -> None:
        home = self.root / f"b{index}"
        conf = home / "broker.conf"
        if not conf.exists():
            home.mkdir()
            conf.write_text(
                rocketmq_servers.controller_broker_conf(
                    self.namesrv_port, self.controller_port, self.ports[index],
                    str(home / "store"), "Sync", NAME, self.extra,
                )
            )  # fmt: skip
        self.running[index] = rocketmq_servers.start_broker(home, conf, self.ports[index])

    def master(self) -> int | None:
        """The index of the master named by the last :meth:`all_in_sync`."""
        for index, port in enumerate(self.ports):
            if self.master_address == f"127.0.0.1:{port}":
                return index
        return None

    async def all_in_sync(self) -> bool:
        """``mqadmin getSyncStateSet`` names a master and lists every running broker as an
        alive member of the SyncStateSet."""
        command = rocketmq_servers.admin_command(
            "getSyncStateSet", "-a", f"127.0.0.1:{self.controller_port}", "-b", NAME
        )
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            output = (await asyncio.wait_for(process.communicate(), 30))[0].decode(errors="replace")
        except TimeoutError:
            process.kill()
            await process.wait()
            return False
        master = re.search(r"#MasterAddr\s+(\S+)", output)
        self.master_address = master.group(1) if master else None
        alive = set(re.findall(_IN_SYNC_ALIVE, output))
        wanted = {f"127.0.0.1:{self.ports[i]}" for i in self.running}
        return self.master() in self.running and alive == wanted

    def stop(self) -> None:
        for server in [*self.running.values(), *reversed(self.servers)]:
            server.stop(rocketmq_servers.STOP_TIMEOUT_S)


async def wait_for(probe: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.05)


async def send_until_acked(producer: Producer, body: bytes, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return (await producer.send(Message(TOPIC, body))).msg_id
        except ReconsumeError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no send acknowledged in {timeout_s} s: {error}") from error
            await asyncio.sleep(0.02)


def check_alive(brokers: Brokers | RocketMQBrokers) -> None:
    """Every broker this benchmark started and did not kill is still running."""
    for index, server in brokers.running.items():
        if server.process.poll() is not None:
            tail = "".join(server.output[-20:])
            raise RuntimeError(f"broker {index} exited ({server.process.returncode}):\n{tail}")


async def rounds(
    brokers: Brokers | RocketMQBrokers, kills: int, freeze: bool = False
) -> dict[str, Any]:
    """``kills`` rounds; the acknowledged ids in the order sent and the failover times. With
    ``freeze`` the master gets SIGSTOP instead of SIGKILL (its sockets stay open, as when its
    machine or network fails), and SIGKILL once its successor has acknowledged a send."""
    acked: list[str] = []
    failovers: list[float] = []
    async with Producer([brokers.namesrv], send_timeout_s=1.0) as producer:
        acked += [await send_until_acked(producer, b"warm-up") for _ in range(20)]
        try:
            await _kill_rounds(brokers, kills, freeze, producer, acked, failovers)
        except RuntimeError as error:  # the rounds so far are kept, with why they stopped
            print(f"stopped after {len(failovers)} kills: {error}", file=sys.stderr)
            return {"acked": acked, "failover_s": failovers, "error": str(error)}
    return {"acked": acked, "failover_s": failovers}


async def _kill_rounds(
    brokers: Brokers | RocketMQBrokers,
    kills: int,
    freeze: bool,
    producer: Producer,
    acked: list[str],
    failovers: list[float],
) -> None:
    for kill in range(kills):
        await wait_for(brokers.all_in_sync, 120, "replicas in sync")
        check_alive(brokers)
        acked += [await send_until_acked(producer, f"r{kill}-{i}".encode()) for i in range(10)]
        victim = brokers.master()
        assert victim is not None
        print(f"{time.strftime('%T')} kill {kill + 1}: broker {victim}", file=sys.stderr)
        process = brokers.running[victim].process
        killed_at = time.monotonic()
        process.send_signal(signal.SIGSTOP if freeze else signal.SIGKILL)
        if not freeze:
            process.wait()
        acked.append(await send_until_acked(producer, f"after-kill-{kill}".encode()))
        failovers.append(time.monotonic() - killed_at)
        if freeze:
            process.send_signal(signal.SIGKILL)
            process.wait()
        print(f"kill {kill + 1}: failover {failovers[-1]:.2f} s", file=sys.stderr)
        brokers.start(victim)
    # The last broker started again catches up before the stores are looked at.
    await wait_for(brokers.all_in_sync, 120, "replicas in sync")
    check_alive(brokers)


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


async def _pull(admin: AdminClient, address: str, queue: Any, offset: int) -> Any:
    """One pull, again for up to 60 s while the broker refuses it (a broker just started
    answers "system busy" for a while)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await pull_once(
                admin.broker_api, address, queue, offset, group="bench-failover-check"
            )
        except ReconsumeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def lost_on_brokers(namesrv: str, acked: list[str]) -> dict[str, int]:
    """Acknowledged ids missing from each broker the route lists (every message of the topic
    pulled from each, master and slaves, by its broker id)."""
    missing: dict[str, int] = {}
    async with AdminClient([namesrv]) as admin:
        route = await admin.route(TOPIC)
        assert route is not None, f"no route of {TOPIC}"
        for broker in route.brokers.values():
            for broker_id, address in sorted(broker.addresses.items()):
                ids: set[str] = set()
                for queue in route.read_queues:
                    offset = 0
                    while True:
                        pulled = await _pull(admin, address, queue, offset)
                        ids.update(str(m.uniq_key) for m in pulled.messages)
                        if not pulled.messages or pulled.next_begin_offset >= pulled.max_offset:
                            break
                        offset = pulled.next_begin_offset
                gone = sorted(set(acked) - ids)
                missing[f"id {broker_id}"] = len(gone)
                if gone:
                    where = [acked.index(g) for g in gone[:10]]
                    print(f"missing on id {broker_id} ({address}): {where}", file=sys.stderr)
    return missing


def run(
    kills: int, lease_ms: int, data_root: Path = DEFAULT_OUT / "data", freeze: bool = False
) -> dict[str, Any]:
    with data_dir(data_root, "failover") as root:
        namesrv = start_namesrv()
        brokers = Brokers(root, namesrv.address, lease_ms)
        started, load_start = time.strftime("%Y-%m-%d %H:%M:%S %z"), loadavg()
        try:
            for index in range(BROKERS):
                brokers.start(index)
            result = asyncio.run(rounds(brokers, kills, freeze))
        finally:
            brokers.stop()
            namesrv.stop()
        return {
            "system": "reconsume",
            "signal": "STOP" if freeze else "KILL",
            "lease_ms": lease_ms,
            **_measured(result, kills, started, load_start),
            "lost_per_store": lost(root, result["acked"]),
            "error": result.get("error"),
        }


def _measured(result: dict[str, Any], kills: int, started: str, load_start: str) -> dict[str, Any]:
    """The fields every system's rounds report the same way."""
    return {
        "kills": kills,
        "started": started,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
        "failover_s": percentiles(result["failover_s"]),
        "per_kill_s": [round(s, 2) for s in result["failover_s"]],
        "acked": len(result["acked"]),
    }


def run_rocketmq(
    kills: int,
    heartbeat_timeout_ms: int | None,
    data_root: Path = DEFAULT_OUT / "data",
    freeze: bool = False,
) -> dict[str, Any]:
    """The rounds against Apache RocketMQ in controller mode (``RocketMQBrokers``)."""
    reason = rocketmq_servers.ensure_built(print)
    if reason is not None:
        return {"system": "rocketmq", "skipped": reason}
    with data_dir(data_root, "failover-rocketmq") as root:
        started, load_start = time.strftime("%Y-%m-%d %H:%M:%S %z"), loadavg()
        brokers = RocketMQBrokers(root, heartbeat_timeout_ms)
        try:
            brokers.start_controller()
            for index in range(BROKERS):
                brokers.start(index)
            result = asyncio.run(rounds(brokers, kills, freeze))
            # A broker just started again may not yet serve the last messages it holds (its
            # queues are built after its log is fetched): look again, for up to 30 s. Not
            # after rounds that stopped early (the brokers are not all in sync).
            passes: list[dict[str, int]] = [{}]
            if "error" not in result:
                passes = [asyncio.run(lost_on_brokers(brokers.namesrv, result["acked"]))]
            deadline = time.monotonic() + 30
            while any(passes[-1].values()) and time.monotonic() < deadline:
                time.sleep(2)
                passes.append(asyncio.run(lost_on_brokers(brokers.namesrv, result["acked"])))
        finally:
            brokers.stop()
        return {
            "system": "rocketmq",
            "signal": "STOP" if freeze else "KILL",
            "version": rocketmq_servers.versions()["rocketmq"],
            "controller_heartbeat_timeout_ms": heartbeat_timeout_ms,
            **_measured(result, kills, started, load_start),
            "lost_per_store": passes[-1],
            "missing_first_look": passes[0],
            "looks": len(passes),
            "error": result.get("error"),
        }


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{value:.2f} s"


def table(results: list[dict[str, Any]]) -> list[str]:
    """The results as a Markdown table (one row per system, signal and setting)."""
    lines = [
        "| system | failure detected by | signal | kills | failover p50 | p99 | max "
        "| acknowledged | lost per store |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("skipped"):
            lines.append(f"| {r['system']} | skipped: {r['skipped'].splitlines()[0]} |||||||")
            continue
        if r["system"] == "reconsume":
            system, detector = "reconsume", f"lease of {r['lease_ms']:,} ms (`--election file:`)"
        else:
            timeout = r.get("controller_heartbeat_timeout_ms")
            system = f"Apache RocketMQ {r.get('version', '?')}, controller mode"
            detector = (
                "controller: broker channel closed, or no heartbeat for "
                f"{timeout or 10_000:,} ms{'' if timeout else ' (default)'}"
            )
        f = r["failover_s"]
        lost = ", ".join(f"{k}: {v}" for k, v in r["lost_per_store"].items()) or "not looked at"
        if r.get("error"):
            lost += f" (stopped after {f.get('count', 0)} of {r['kills']} kills: {r['error']})"
        lines.append(
            f"| {system} | {detector} | SIG{r.get('signal', 'KILL')} | {f.get('count', 0)} | "
            f"{_seconds(f.get('p50'))} | {_seconds(f.get('p99'))} | {_seconds(f.get('max'))} | "
            f"{r['acked']} | {lost} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    warn_if_plain_interpreter()
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lease-ms", default="3000,5000", help="comma-separated lease durations")
    parser.add_argument(
        "--systems", default="reconsume", help="comma-separated, of reconsume,rocketmq"
    )
    parser.add_argument(
        "--rocketmq-heartbeat-ms",
        default="default",
        help="comma-separated controllerHeartBeatTimeoutMills of the RocketMQ brokers, "
        "'default' for none set (10000)",
    )
    parser.add_argument(
        "--signal",
        default="KILL",
        help="comma-separated of KILL (the default) and STOP: SIGSTOP the master (sockets stay "
        "open, like a failed machine), SIGKILL it once its successor has acknowledged a send; "
        "run in the background, give STOP a session of its own (setsid): the kernel hangs up "
        "an orphaned process group that has a stopped member, this benchmark included",
    )
    parser.add_argument("--write-json", type=Path, default=DEFAULT_OUT / "failover.json")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_OUT / "data")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir.resolve()  # the Java servers read their paths elsewhere
    systems = [s for s in args.systems.split(",") if s]
    if not set(systems) <= set(SYSTEMS):
        parser.error(f"unknown systems in {args.systems!r}; choose from {', '.join(SYSTEMS)}")
    command = " ".join(getattr(sys, "orig_argv", sys.argv))
    signals = [s for s in args.signal.split(",") if s]
    if not set(signals) <= {"KILL", "STOP"}:
        parser.error(f"unknown signals in {args.signal!r}; choose from KILL,STOP")
    results: list[dict[str, Any]] = []
    for freeze in (name == "STOP" for name in signals):
        for system in systems:
            if system == "reconsume":
                results += [
                    run(args.kills, int(ms), args.data_dir, freeze)
                    for ms in args.lease_ms.split(",")
                ]
            else:
                results += [
                    run_rocketmq(
                        args.kills, None if ms == "default" else int(ms), args.data_dir, freeze
                    )
                    for ms in args.rocketmq_heartbeat_ms.split(",")
                ]
    document = {"command": command, "machine": machine_info(args.data_dir), "results": results}
    write_json(args.write_json, document)
    print(json.dumps(results, indent=1))
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
