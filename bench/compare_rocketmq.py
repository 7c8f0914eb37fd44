"""reconsume side by side with Apache RocketMQ 5.3, driven by one Java load generator.

    python -m bench.compare_rocketmq --out bench/out            # both flush modes, ~10 min
    python -m bench.compare_rocketmq --quick --out /tmp/bench   # seconds, numbers meaningless
    python -m bench.run --scenarios rocketmq --write bench/RESULTS.md   # the same, in RESULTS.md

For each flush mode (Async, then Sync), one system at a time: a fresh name server and broker
of reconsume (``bench.servers``), then of Apache RocketMQ (``bench.rocketmq_servers``: Maven
Central jars, built with the load generator by ``bench/java``). Against each, the same
commands of the load generator (``bench/java/loadgen``, Apache RocketMQ's 4.9.8 client), one
JVM per command, each printing one JSON line:

* setup: wait for the broker in the name server, create the topics (8 queues) and the retry
  group's retry topic;
* warm-up (unmeasured): 8 threads send for a while, then a push consumer drains what they sent,
  so both brokers' send and pull paths are warm (the JVM's JIT compiles them);
* produce: sync sends of 1 KiB bodies from 1 thread, then 8 threads sharing one producer;
* consume (Async only): a pre-filled topic drained by one push consumer, msg/s from the first
  receipt to the last;
* retry (Async only): a listener fails each message once (RECONSUME_LATER: the broker's
  send-back at delay level 3 + reconsumeTimes = 1 s on both brokers) and succeeds on its
  redelivery; msg/s = messages / (consumer start to the last success);
* lateness (Async only): delayed messages at a steady rate, half with a delay level, half with
  the TIMER_DELIVER_MS property; lateness = the consumer's receive time - the intended delivery
  time.

Both brokers: one broker, 127.0.0.1, 64 MiB commit-log files, delay levels ``DELAY_LEVELS``.

With ``--replication`` each system is a master and one replica kept in sync instead: two
``reconsume broker`` processes (``--replication Sync`` and ``--broker-id 1 --master``,
``bench.servers.replicated_servers``) against Apache RocketMQ's SYNC_MASTER and SLAVE of one
brokerName (``bench.rocketmq_servers.rocketmq_replicated_servers``), same flush mode on all
four brokers. Setup then also waits until the name server lists both brokers and a send is
answered SEND_OK (the replica is in sync); produce, consume and retry run under both flush
modes, lateness not at all. The JSON goes to ``compare_rocketmq_replication.json`` and the
section of bench/RESULTS.md to ``compare_rocketmq_replication.md`` beside it:

    python -m bench.compare_rocketmq --replication --out bench/out   # ~10 min

With ``--acl``: access control off and on for each system, reconsume against Apache RocketMQ
5.3.2 with ``aclEnable=true`` (``bench.compare_acl``; ``compare_rocketmq_acl.json`` and
``.md``, ``bench.acl_report``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_OUT,
    loadavg,
    machine_info,
    settle_disk,
    warn_if_plain_interpreter,
    write_json,
)
from bench.rocketmq_report import render_replication
from bench.rocketmq_servers import (
    BROKER_JVM,
    BROKER_MAIN,
    DELAY_LEVELS,
    LOADGEN_JVM,
    MVN_COMMAND,
    NAMESRV_JVM,
    NAMESRV_MAIN,
    broker_conf,
    display,
    ensure_built,
    loadgen_command,
    replicated_broker_confs,
    rocketmq_replicated_servers,
    rocketmq_servers,
    versions,
)
from bench.servers import REPLICATION_ARGS, Running, cpu_seconds, replicated_servers, servers

SYSTEMS = ("reconsume", "rocketmq")
FILE = "compare_rocketmq"
REPLICATION_FILE = "compare_rocketmq_replication"
RETRY_GROUP = "bench-retry"
TOPICS = ("BenchWarmup", "BenchProduce", "BenchConsume", "BenchRetry", "BenchDelay")


@dataclass(frozen=True, slots=True)
class CompareSizes:
    """How much each command does; ``full()`` is what RESULTS.md reports."""

    warmup_seconds: float = 15.0
    """Unmeasured sends (8 threads) and their draining before the measured commands."""
    produce_seconds: float = 15.0
    produce_warmup_seconds: float = 3.0
    """Each produce JVM sends this long before its measured window (the client warms up)."""
    consume_messages: int = 200_000
    retry_messages: int = 20_000
    lateness_seconds: float = 10.0
    lateness_rate: float = 500.0
    max_level: int = 6
    timer_ms: tuple[int, int] = (1_000, 5_000)
    flush_modes: tuple[str, ...] = ("Async", "Sync")

    @classmethod
    def full(cls) -> CompareSizes:
        return cls()

    @classmethod
    def quick(cls) -> CompareSizes:
        """Tiny sizes for the smoke test: seconds per system, numbers meaningless."""
        return cls(
            warmup_seconds=0.5,
            produce_seconds=0.5,
            produce_warmup_seconds=0.2,
            consume_messages=500,
            retry_messages=50,
            lateness_seconds=1.0,
            lateness_rate=40.0,
            max_level=3,
            timer_ms=(1_000, 2_000),
            flush_modes=("Async",),
        )


def commands(
    sizes: CompareSizes, flush_mode: str, replication: bool = False
) -> list[tuple[str, list[str]]]:
    """(case, LoadGen arguments after ``--namesrv``) in the order they run."""
    produce = ["--topic", "BenchProduce", "--seconds", f"{sizes.produce_seconds:g}"]
    produce += ["--warmup-seconds", f"{sizes.produce_warmup_seconds:g}", "--body", "1024"]
    # With a replica: the slave registered and in sync (a send answered SEND_OK) first.
    wait = ["--replicas", "2", "--probe-topic", "BenchWarmup"] if replication else []
    cases = [
        ("setup", ["setup", "--topics", ",".join(TOPICS), "--queues", "8",
                   "--retry-groups", RETRY_GROUP, *wait]),
        ("warmup", ["produce", "--topic", "BenchWarmup", "--threads", "8",
                    "--seconds", f"{sizes.warmup_seconds:g}", "--warmup-seconds", "0"]),
        ("warmup-drain", ["consume", "--topic", "BenchWarmup", "--group", "bench-warmup",
                          "--messages", "WARMUP_SENT"]),
        ("produce-1", ["produce", "--threads", "1", *produce]),
        ("produce-8", ["produce", "--threads", "8", *produce]),
    ]  # fmt: skip
    messages = str(sizes.consume_messages)
    if replication:
        return [
            *cases,
            ("fill", ["fill", "--topic", "BenchConsume", "--messages", messages]),
            ("consume", ["consume", "--topic", "BenchConsume", "--group", "bench-consume",
                         "--messages", messages]),
            ("retry", ["retry", "--topic", "BenchRetry", "--group", RETRY_GROUP,
                       "--messages", str(sizes.retry_messages)]),
        ]  # fmt: skip
    if flush_mode == "Async":
        lateness = [
            "--seconds",
            f"{sizes.lateness_seconds:g}",
            "--rate",
            f"{sizes.lateness_rate:g}",
        ]
        lateness += ["--levels", DELAY_LEVELS, "--max-level", str(sizes.max_level)]
        lateness += [
            "--timer-min-ms",
            str(sizes.timer_ms[0]),
            "--timer-max-ms",
            str(sizes.timer_ms[1]),
        ]
        cases += [
            ("fill", ["fill", "--topic", "BenchConsume", "--messages", messages]),
            ("consume", ["consume", "--topic", "BenchConsume", "--group", "bench-consume",
                         "--messages", messages]),
            ("retry", ["retry", "--topic", "BenchRetry", "--group", RETRY_GROUP,
                       "--messages", str(sizes.retry_messages)]),
            ("lateness", ["lateness", "--topic", "BenchDelay", "--group", "bench-delay",
                          *lateness]),
        ]  # fmt: skip
    return cases


def _servers(
    system: str,
    data_root: Path,
    flush_mode: str,
    replication: bool = False,
    replica_flush: str | None = None,
) -> AbstractContextManager[Running]:
    if replication:
        if system == "rocketmq":
            return rocketmq_replicated_servers(data_root, flush_mode, DELAY_LEVELS)
        return replicated_servers(
            data_root, flush_mode, "--delay-levels", DELAY_LEVELS, name="vs-rocketmq-replicated",
            replica_flush=replica_flush,
        )  # fmt: skip
    if system == "rocketmq":
        return rocketmq_servers(data_root, flush_mode, DELAY_LEVELS)
    return servers(data_root, flush_mode, "--delay-levels", DELAY_LEVELS, name="vs-rocketmq")


def _loadgen(args: list[str], running: Running, log_root: Path) -> dict[str, Any]:
    """Run one load generator command; its JSON line, with ``client_cpu_seconds``: the JVM's
    CPU time over the whole command (start, JIT and GC included), from the rusage of waited-for
    children (the servers, still running, are not in it yet)."""
    command = loadgen_command(args[0], running.namesrv, *args[1:], log_root=log_root)
    before = _children_cpu()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    client_cpu = _children_cpu() - before
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["client_cpu_seconds"] = client_cpu
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _replica_cpu(running: Running) -> float:
    return sum(cpu_seconds(replica.pid) for replica in running.replicas)


def run_system(
    system: str,
    flush_mode: str,
    sizes: CompareSizes,
    data_root: Path,
    log: Callable[[str], None],
    replication: bool = False,
    replica_flush: str | None = None,
) -> dict[str, Any]:
    """Sync the disk (:func:`~bench.common.settle_disk`), start ``system``'s servers, run
    every command against them, stop them."""
    cases: dict[str, Any] = {}
    sync_seconds = settle_disk()
    started = time.perf_counter()
    with _servers(system, data_root, flush_mode, replication, replica_flush) as running:
        start_seconds = time.perf_counter() - started
        log_root = running.store.parent / "client-logs"
        warmup_sent = "0"
        for case, args in commands(sizes, flush_mode, replication):
            args = [warmup_sent if a == "WARMUP_SENT" else a for a in args]
            load_start, cpu_start = loadavg(), cpu_seconds(running.broker.pid)
            replica_cpu_start = _replica_cpu(running)
            wall_start = time.perf_counter()
            result = _loadgen(args, running, log_root)
            result["wall_seconds"] = time.perf_counter() - wall_start
            result["broker_cpu_seconds"] = cpu_seconds(running.broker.pid) - cpu_start
            if running.replicas:
                result["replica_cpu_seconds"] = _replica_cpu(running) - replica_cpu_start
            result["loadavg_start"] = load_start
            result["args"] = args
            cases[case] = result
            if case == "warmup":
                warmup_sent = str(result["messages"])
            log(f"  {system} {flush_mode} {case}: {_brief(result)}")
        stopping = time.perf_counter()
    return {
        "system": system,
        "flush_mode": flush_mode,
        "replication": replication,
        "replica_flush": (replica_flush or flush_mode) if replication else None,
        "sync_seconds": sync_seconds,
        "start_seconds": start_seconds,
        "stop_seconds": time.perf_counter() - stopping,
        "cases": cases,
    }


def _brief(result: dict[str, Any]) -> str:
    if "msgs_per_s" in result:
        return f"{result['msgs_per_s'] or 0:,.0f} msg/s"
    if "all" in result:
        level, timer = result["level"], result["timer"]
        return (
            f"lateness p50/p99 level {level.get('p50')}/{level.get('p99')} ms, "
            f"timer {timer.get('p50')}/{timer.get('p99')} ms"
        )
    return f"{result.get('seconds', 0):.1f} s"


def _example_confs(flush_mode: str) -> tuple[str, str]:
    ports, stores = (10911, 10921), ("DIR/store-master", "DIR/store-slave")
    return replicated_broker_confs(9876, ports, stores, flush_mode, DELAY_LEVELS)


def _replicated_settings(sizes: CompareSizes) -> dict[str, Any]:
    """The master's and slave's broker.conf and reconsume's two broker commands."""
    reconsume = (
        "reconsume broker --listen 127.0.0.1:0 --namesrv NAMESRV --broker-name bench-broker "
        "--cluster bench --flush MODE --config broker.toml "
        f"--delay-levels {shlex.quote(DELAY_LEVELS)}"
    )
    return {
        "broker_conf": {
            mode: dict(zip(("master", "slave"), _example_confs(mode), strict=True))
            for mode in sizes.flush_modes
        },
        "reconsume_commands": [
            "reconsume namesrv --listen 127.0.0.1:0",
            f"{reconsume} --store-dir DIR/store {shlex.join(REPLICATION_ARGS)}   # MASTER",
            f"{reconsume} --store-dir DIR/replica --broker-id 1 --master MASTER",
            "# broker.toml: [store] commit_log_segment_bytes = 67108864",
        ],
    }


def settings(sizes: CompareSizes, replication: bool = False) -> dict[str, Any]:
    """What the report shows of how the servers and the load generator were run (``DIR``: the
    run's data directory; ports are picked free for each run)."""
    java_lib = "bench/java/servers/target/lib/*"
    home = ("-Drocketmq.home.dir=DIR", "-Duser.home=DIR", "-cp", java_lib)
    return {
        "replication": replication,
        "delay_levels": DELAY_LEVELS,
        "sizes": asdict(sizes),
        "mvn": display(MVN_COMMAND),
        "namesrv_command": shlex.join(
            ["java", *NAMESRV_JVM, *home, NAMESRV_MAIN, "-c", "namesrv.conf"]
        ),
        "broker_command": shlex.join(
            ["java", *BROKER_JVM, *home, BROKER_MAIN, "-c", "broker.conf"]
        ),
        "broker_conf": {
            mode: broker_conf(9876, 10911, "DIR/store", mode, DELAY_LEVELS)
            for mode in sizes.flush_modes
        },
        "reconsume_commands": [
            "reconsume namesrv --listen 127.0.0.1:0",
            "reconsume broker --listen 127.0.0.1:0 --namesrv NAMESRV --store-dir DIR/store "
            "--broker-name bench-broker --cluster bench --flush MODE --config broker.toml "
            f"--delay-levels {shlex.quote(DELAY_LEVELS)}   # broker.toml: "
            "[store] commit_log_segment_bytes = 67108864",
        ],
        "loadgen_prefix": display(loadgen_command("-", "-", log_root=Path("DIR"))[:-3]),
        "loadgen_jvm": list(LOADGEN_JVM),
        "commands": {
            mode: [
                {"case": case, "args": shlex.join(args)}
                for case, args in commands(sizes, mode, replication)
            ]
            for mode in sizes.flush_modes
        },
        **(_replicated_settings(sizes) if replication else {}),
    }


def run(
    data_root: Path,
    quick: bool = False,
    log: Callable[[str], None] = print,
    systems: Sequence[str] = SYSTEMS,
    replication: bool = False,
    flush_modes: Sequence[str] | None = None,
    replica_flush: str | None = None,
) -> dict[str, Any]:
    """Every command against each system, per flush mode; ``replica_flush``: reconsume's replica
    under this flush mode instead of the master's (with ``replication``)."""
    sizes = CompareSizes.quick() if quick else CompareSizes.full()
    if flush_modes is not None:
        sizes = replace(sizes, flush_modes=tuple(flush_modes))
    document: dict[str, Any] = {
        "scenario": REPLICATION_FILE if replication else FILE,
        "quick": quick,
        "settings": settings(sizes, replication),
    }
    reason = ensure_built(log)
    if reason is not None:
        if not quick:
            raise RuntimeError(f"cannot compare with Apache RocketMQ: {reason}")
        log(f"  skipped: {reason}")
        document["skipped"] = reason
        return document
    document["versions"] = versions()
    document["runs"] = [
        run_system(system, flush_mode, sizes, data_root, log, replication, replica_flush)
        for flush_mode in sizes.flush_modes
        for system in systems
    ]
    return document


def _iter_rows(document: dict[str, Any]) -> Iterator[str]:
    for entry in document.get("runs", []):
        for case, result in entry["cases"].items():
            yield f"{entry['system']:9s} {entry['flush_mode']:5s} {case:12s} {_brief(result)}"


def main(argv: list[str] | None = None) -> int:
    warn_if_plain_interpreter()
    parser = argparse.ArgumentParser(prog="python -m bench.compare_rocketmq", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON goes to OUT/" + FILE)
    parser.add_argument("--data-dir", type=Path, help="where stores are created (OUT/data)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="which pairs to run, comma-separated (default: %(default)s); e.g. reconsume alone "
        "with PYTHONPATH naming another checkout's broker_image, for a before/after",
    )
    parser.add_argument(
        "--replication",
        action="store_true",
        help="a master and one Sync replica per system instead of one broker",
    )
    parser.add_argument(
        "--acl",
        action="store_true",
        help="access control off and on per system (bench.compare_acl): produce and consume, "
        "Async flush, Apache RocketMQ 5.3.2 with aclEnable",
    )
    parser.add_argument(
        "--flush-modes", help="comma-separated subset of Async,Sync (default: both; quick: Async)"
    )
    parser.add_argument(
        "--replica-flush",
        choices=("Async", "Sync"),
        help="with --replication: reconsume's replica under this flush mode (default: the "
        "master's), e.g. Async beside a Sync master, as Apache RocketMQ's slave acknowledges "
        "before its own flush",
    )
    parser.add_argument(
        "--file", help=f"JSON file name under OUT ({FILE}, with --replication {REPLICATION_FILE})"
    )
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    flush_modes = None if args.flush_modes is None else args.flush_modes.split(",")
    if flush_modes is not None and not set(flush_modes) <= {"Async", "Sync"}:
        parser.error(f"unknown flush modes in {args.flush_modes!r}")
    if args.acl and (args.replication or flush_modes or args.replica_flush):
        parser.error("--acl runs one broker per system under Async flush")
    from bench import acl_report, compare_acl  # they import this module

    file = args.file or (
        compare_acl.FILE if args.acl else REPLICATION_FILE if args.replication else FILE
    )
    # Absolute: the Java servers run in their own directories and read their paths from there.
    data_root: Path = (args.data_dir or args.out / "data").resolve()
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started_at, load_start = time.strftime("%Y-%m-%d %H:%M:%S %z"), loadavg()
    started = time.perf_counter()
    if args.acl:
        document = compare_acl.run(data_root, args.quick, systems=systems)
    else:
        document = run(
            data_root, args.quick, systems=systems, replication=args.replication,
            flush_modes=flush_modes, replica_flush=args.replica_flush,
        )  # fmt: skip
    document["machine"] = machine_info(data_root)
    document["wall_seconds"] = time.perf_counter() - started
    document["command"] = command
    document["started"], document["finished"] = started_at, time.strftime("%Y-%m-%d %H:%M:%S %z")
    document["loadavg_start"], document["loadavg_end"] = load_start, loadavg()
    write_json(args.out / f"{file}.json", document)
    if args.replication:
        (args.out / f"{file}.md").write_text("\n".join(render_replication(document)) + "\n")
    if args.acl:
        (args.out / f"{file}.md").write_text("\n".join(acl_report.render_acl(document)) + "\n")
        print("\n".join(acl_report.figures(document) if "runs" in document else []))
    else:
        print("\n".join(_iter_rows(document)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
