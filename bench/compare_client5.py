"""RocketMQ 5's clients (gRPC): reconsume side by side with Apache RocketMQ 5.3's broker and
proxy, driven by one Java load generator on Apache RocketMQ's 5.x client.

    python -m bench.compare_client5 --out bench/out            # ~7 min
    python -m bench.compare_client5 --quick --out /tmp/bench   # ~3 min, numbers meaningless
    python -m bench.compare_client5 --systems reconsume --profile produce-8 --out /tmp/prof

One system at a time, Async flush: a fresh name server and broker of reconsume with
``--grpc-listen 127.0.0.1:0`` (``bench.servers``), then a fresh Apache RocketMQ name server,
broker and cluster-mode proxy (``bench.rocketmq_proxy``; Maven Central jars, built with the
load generator by ``bench/java``). Topics (8 queues; on Apache RocketMQ ``message.type=NORMAL``,
which its proxy checks a send against) and consumer groups are created first (setup), through
each system's admin path. Then, against each, the same commands of the load generator
(``bench/java/loadgen5``, rocketmq-client-java 5.2.0, plaintext gRPC to the one endpoint), one
JVM per command, each printing one JSON line:

* warm-up (unmeasured): 8 threads send for a while, then a simple consumer drains what they
  sent, so both systems' send and receive paths are warm (the JVMs' JIT compiles them);
* produce: sync ``send()`` of 1 KiB bodies from 1 thread, then 8 threads sharing one producer;
* fill (unmeasured), then consume: the filled topic drained by a simple consumer (4 threads
  receiving batches of up to 32, acking every message of a batch before the next receive;
  msg/s from the first receipt to the last ack), then by a push consumer of another group
  (default settings, 20 consumption threads; msg/s from the first listener call to the last);
* redelivery: messages at a steady rate, received by a simple consumer with invisible duration
  ``invisible_ms`` that keeps receives outstanding and does not ack a first delivery; lateness
  = second receipt - (first receipt + invisible duration). Apache RocketMQ's proxy refuses an
  invisible duration under ``minInvisibleTimeMillsForRecv`` (10 s by default): it is lowered to
  ``invisible_ms`` for the run (``proxy_settings``), reconsume's least is 1 s.

CPU seconds of the server processes are recorded per case: reconsume's broker; Apache
RocketMQ's broker and proxy (each name server's are left out on both sides); and those of the
load generator's JVM (with ``--profile``, py-spy's as well), and the 1, 5 and 15 minute load
averages at each case's start. The JSON goes to ``OUT/compare_client5.json``, the
section of bench/RESULTS.md to ``OUT/compare_client5.md`` (``bench.client5_report``).

``--profile CASE[,CASE]`` samples reconsume's broker with py-spy over those cases (raw stacks
and the top functions in ``OUT/compare_client5-profile-CASE.txt``): a run of its own, since the
sampling takes CPU from a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
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
from bench.rocketmq_proxy import (
    PROXY_JVM,
    PROXY_MAIN,
    RunningProxy,
    create_group,
    create_topic,
    proxy_conf,
    rocketmq_proxy_servers,
    wait_route,
)
from bench.rocketmq_servers import (
    BROKER_JVM,
    BROKER_MAIN,
    DELAY_LEVELS,
    LOADGEN5_JAR,
    LOADGEN5_LIB,
    LOADGEN_JVM,
    MVN_COMMAND,
    NAMESRV_JVM,
    NAMESRV_MAIN,
    PROXY_LIB,
    SERVER_LIB,
    _jar_version,
    broker_conf,
    display,
    ensure_built,
)
from bench.servers import GRPC_ARGS, Running, cpu_seconds, servers
from bench.servers import create_topic as create_reconsume_topic
from reconsume.client.admin import AdminClient
from reconsume.message.configs import SubscriptionGroupConfig

SYSTEMS = ("reconsume", "rocketmq")
FILE = "compare_client5"
LOADGEN5_MAIN = "io.reconsume.bench.LoadGen5"
QUEUES = 8
TOPICS = ("BenchWarmup", "BenchProduce", "BenchConsume", "BenchRedelivery")
GROUPS = ("bench-warmup", "bench-consume-simple", "bench-consume-push", "bench-redelivery")
FLUSH_MODE = "Async"


@dataclass(frozen=True, slots=True)
class Client5Sizes:
    """How much each command does; ``full()`` is what RESULTS.md reports."""

    warmup_seconds: float = 15.0
    """Unmeasured sends (8 threads) and their draining before the measured commands."""
    produce_seconds: float = 15.0
    produce_warmup_seconds: float = 3.0
    """Each produce JVM sends this long before its measured window (the client warms up)."""
    consume_messages: int = 100_000
    redelivery_seconds: float = 10.0
    redelivery_warmup_seconds: float = 2.0
    """Messages sent in these first seconds are redelivered too, but summarized apart."""
    redelivery_rate: float = 200.0
    invisible_ms: int = 2_000
    receivers: int = 4
    """Threads of a simple consumer, each with a receive outstanding while it is not handling
    a batch (consume and redelivery)."""

    @classmethod
    def full(cls) -> Client5Sizes:
        return cls()

    @classmethod
    def quick(cls) -> Client5Sizes:
        """Tiny sizes for the smoke test: seconds per system, numbers meaningless."""
        return cls(
            warmup_seconds=0.5,
            produce_seconds=0.5,
            produce_warmup_seconds=0.2,
            consume_messages=500,
            redelivery_seconds=1.0,
            redelivery_warmup_seconds=0.5,
            redelivery_rate=40.0,
            invisible_ms=1_000,
        )


def proxy_settings(sizes: Client5Sizes) -> dict[str, object]:
    """rmq-proxy.json's fields beside ``proxy_conf``'s: the redelivery's invisible duration
    allowed (``minInvisibleTimeMillsForRecv``, 10 s by default)."""
    return {"minInvisibleTimeMillsForRecv": sizes.invisible_ms}


def commands(sizes: Client5Sizes) -> list[tuple[str, list[str]]]:
    """(case, LoadGen5 arguments after ``--endpoint``) in the order they run."""
    produce = ["--topic", "BenchProduce", "--seconds", f"{sizes.produce_seconds:g}"]
    produce += ["--warmup-seconds", f"{sizes.produce_warmup_seconds:g}", "--body", "1024"]
    messages = str(sizes.consume_messages)
    simple = ["--mode", "simple", "--batch", "32", "--receivers", str(sizes.receivers)]
    redelivery = ["--seconds", f"{sizes.redelivery_seconds:g}"]
    redelivery += ["--warmup-seconds", f"{sizes.redelivery_warmup_seconds:g}"]
    redelivery += [
        "--rate",
        f"{sizes.redelivery_rate:g}",
        "--invisible-ms",
        str(sizes.invisible_ms),
    ]
    redelivery += ["--receivers", str(sizes.receivers), "--batch", "32", "--body", "1024"]
    return [
        ("warmup", ["produce", "--topic", "BenchWarmup", "--threads", "8",
                    "--seconds", f"{sizes.warmup_seconds:g}", "--warmup-seconds", "0"]),
        ("warmup-drain", ["consume", "--topic", "BenchWarmup", "--group", "bench-warmup",
                          "--messages", "WARMUP_SENT", *simple]),
        ("produce-1", ["produce", "--threads", "1", *produce]),
        ("produce-8", ["produce", "--threads", "8", *produce]),
        ("fill", ["fill", "--topic", "BenchConsume", "--messages", messages, "--body", "1024"]),
        ("consume-simple", ["consume", "--topic", "BenchConsume", "--group",
                            "bench-consume-simple", "--messages", messages, *simple]),
        ("consume-push", ["consume", "--topic", "BenchConsume", "--group", "bench-consume-push",
                          "--messages", messages, "--mode", "push"]),
        ("redelivery", ["redelivery", "--topic", "BenchRedelivery", "--group",
                        "bench-redelivery", *redelivery]),
    ]  # fmt: skip


def loadgen5_command(command: str, endpoint: str, *args: str, log_root: Path) -> list[str]:
    """``java ... LoadGen5 <command> --endpoint <endpoint> <args>`` (client logs under
    ``log_root``)."""
    classpath = f"{LOADGEN5_JAR}:{LOADGEN5_LIB}/*"
    return [
        "java", *LOADGEN_JVM, f"-Drocketmq.log.root={log_root}", "-cp", classpath,
        LOADGEN5_MAIN, command, "--endpoint", endpoint, *args,
    ]  # fmt: skip


@dataclass
class Target:
    """One system's servers as the load generator and the CPU accounting see them."""

    endpoint: str
    """The gRPC endpoint, ``127.0.0.1:PORT``."""
    processes: dict[str, int]
    """Name ("broker", "proxy") -> pid of each process whose CPU time is counted."""
    log_root: Path
    setup: Callable[[], None] = field(repr=False)


def _setup_reconsume(running: Running) -> None:
    async def create() -> None:
        for topic in TOPICS:
            await create_reconsume_topic(running.namesrv, topic, QUEUES)
        async with AdminClient([running.namesrv]) as admin:
            for group in GROUPS:
                await admin.create_group(SubscriptionGroupConfig(group_name=group))

    asyncio.run(create())
    for topic in TOPICS:
        wait_route(running.grpc, topic)


def _setup_rocketmq(running: RunningProxy) -> None:
    for topic in TOPICS:
        create_topic(running, topic, "NORMAL", QUEUES)
    for group in GROUPS:
        create_group(running, group)


@contextmanager
def _target(system: str, data_root: Path, sizes: Client5Sizes) -> Iterator[Target]:
    if system == "rocketmq":
        settings = proxy_settings(sizes)
        with rocketmq_proxy_servers(data_root, FLUSH_MODE, DELAY_LEVELS, settings) as proxied:
            pids = {"broker": proxied.broker.pid, "proxy": proxied.proxy.pid}
            logs = proxied.home / "client-logs"
            yield Target(proxied.endpoint, pids, logs, lambda: _setup_rocketmq(proxied))
        return
    with servers(
        data_root, FLUSH_MODE, "--delay-levels", DELAY_LEVELS, name="vs-rocketmq5", grpc=True
    ) as running:
        logs = running.store.parent / "client-logs"
        pids = {"broker": running.broker.pid}
        yield Target(running.grpc, pids, logs, lambda: _setup_reconsume(running))


def _loadgen5(args: list[str], target: Target) -> dict[str, Any]:
    command = loadgen5_command(args[0], target.endpoint, *args[1:], log_root=target.log_root)
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _cpu(target: Target) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in target.processes.items()}


def _children_cpu() -> float:
    """User + system CPU seconds of this process's children that have been waited for (the load
    generator's JVMs, once each has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _profiled(pid: int, case: str, out: Path | None) -> Iterator[None]:
    """py-spy on ``pid`` while the block runs, when ``out`` names the file for its stacks."""
    if out is None:
        yield
        return
    from bench.profile_client import _record, _stop, summarize

    raw = out.with_suffix(".raw")
    recorder = _record(pid, raw, 200)
    time.sleep(1.0)  # attached and sampling
    try:
        yield
    finally:
        _stop([recorder])
        summary = summarize(raw, 30) if raw.is_file() else ["  (no samples)"]
        out.write_text(f"reconsume broker (pid {pid}), case {case}\n" + "\n".join(summary) + "\n")


def run_system(
    system: str,
    sizes: Client5Sizes,
    data_root: Path,
    log: Callable[[str], None],
    profile: Sequence[str] = (),
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    """Sync the disk (:func:`~bench.common.settle_disk`), start ``system``'s servers, create
    the topics and groups, run every command against them, stop them."""
    cases: dict[str, Any] = {}
    sync_seconds = settle_disk()
    started = time.perf_counter()
    with _target(system, data_root, sizes) as target:
        start_seconds = time.perf_counter() - started
        load_start, setup_start = loadavg(), time.perf_counter()
        target.setup()
        cases["setup"] = {
            "topics": list(TOPICS), "groups": list(GROUPS), "queues": QUEUES,
            "seconds": time.perf_counter() - setup_start, "loadavg_start": load_start,
        }  # fmt: skip
        log(f"  {system} setup: {cases['setup']['seconds']:.1f} s")
        warmup_sent = "0"
        for case, args in commands(sizes):
            args = [warmup_sent if a == "WARMUP_SENT" else a for a in args]
            out = None
            if system == "reconsume" and case in profile and profile_dir is not None:
                out = profile_dir / f"{FILE}-profile-{case}.txt"
            load_start, cpu_start = loadavg(), _cpu(target)
            wall_start, loadgen_start = time.perf_counter(), _children_cpu()
            with _profiled(target.processes["broker"], case, out):
                result = _loadgen5(args, target)
            result["wall_seconds"] = time.perf_counter() - wall_start
            result["loadgen_cpu_seconds"] = _children_cpu() - loadgen_start
            cpu_end = _cpu(target)
            for name, before in cpu_start.items():
                result[f"{name}_cpu_seconds"] = cpu_end[name] - before
            result["server_cpu_seconds"] = sum(cpu_end.values()) - sum(cpu_start.values())
            result["loadavg_start"] = load_start
            result["args"] = args
            cases[case] = result
            if case == "warmup":
                warmup_sent = str(result["messages"])
            log(f"  {system} {case}: {brief(result)}")
        stopping = time.perf_counter()
    return {
        "system": system,
        "flush_mode": FLUSH_MODE,
        "sync_seconds": sync_seconds,
        "start_seconds": start_seconds,
        "stop_seconds": time.perf_counter() - stopping,
        "cases": cases,
    }


def brief(result: dict[str, Any]) -> str:
    if "lateness_ms" in result:
        late = result["lateness_ms"]
        return f"lateness p50/p99/max {late.get('p50')}/{late.get('p99')}/{late.get('max')} ms"
    if "msgs_per_s" in result:
        return f"{result['msgs_per_s'] or 0:,.0f} msg/s"
    return f"{result.get('seconds', 0):.1f} s"


def versions() -> dict[str, str]:
    """Versions of Apache RocketMQ's broker and proxy, of the 5.x client and of Java."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return {
        "rocketmq": _jar_version(SERVER_LIB, "rocketmq-broker"),
        "proxy": _jar_version(PROXY_LIB, "rocketmq-proxy"),
        "client": _jar_version(LOADGEN5_LIB, "rocketmq-client-java"),
        "java": java.stderr.strip().splitlines()[0] if java.stderr.strip() else "?",
        "java_runtime": " ".join(java.stderr.strip().splitlines()[1:2]),
    }


def settings(sizes: Client5Sizes) -> dict[str, Any]:
    """What the report shows of how the servers and the load generator were run (``DIR``: the
    run's data directory; ports are picked free for each run, 9876 etc. stand for them)."""
    home = ("-Drocketmq.home.dir=DIR", "-Duser.home=DIR", "-cp", "bench/java/servers/target/lib/*")
    proxy_home = ("-Drocketmq.home.dir=DIR/proxy", "-Duser.home=DIR/proxy")
    proxy = [*proxy_home, "-cp", "bench/java/servers-proxy/target/lib/*", PROXY_MAIN]
    rocketmq = [
        ["java", *NAMESRV_JVM, *home, NAMESRV_MAIN, "-c", "namesrv.conf"],
        ["java", *BROKER_JVM, *home, BROKER_MAIN, "-c", "broker.conf"],
        ["java", *PROXY_JVM, *proxy, "-pc", "DIR/proxy/rmq-proxy.json"],
    ]
    topic_args = f"-c bench -r {QUEUES} -w {QUEUES} -a +message.type=NORMAL"
    setup = [f"mqadmin updateTopic -n NAMESRV -t {topic} {topic_args}" for topic in TOPICS]
    setup += [f"mqadmin updateSubGroup -n NAMESRV -c bench -g {g} -o false -r 16" for g in GROUPS]
    delay_levels = shlex.quote(DELAY_LEVELS)
    return {
        "flush_mode": FLUSH_MODE,
        "delay_levels": DELAY_LEVELS,
        "sizes": asdict(sizes),
        "topics": list(TOPICS),
        "groups": list(GROUPS),
        "queues": QUEUES,
        "mvn": display(MVN_COMMAND),
        "rocketmq_commands": [shlex.join(command) for command in rocketmq],
        "broker_conf": broker_conf(9876, 10911, "DIR/store", FLUSH_MODE, DELAY_LEVELS),
        "proxy_conf": proxy_conf(9876, 8081, 8080, proxy_settings(sizes)),
        "rocketmq_setup": setup,
        "reconsume_commands": [
            "reconsume namesrv --listen 127.0.0.1:0",
            "reconsume broker --listen 127.0.0.1:0 --namesrv NAMESRV --store-dir DIR/store "
            f"--broker-name bench-broker --cluster bench --flush {FLUSH_MODE} "
            f"--config broker.toml --delay-levels {delay_levels} {shlex.join(GRPC_ARGS)}"
            "   # broker.toml: [store] commit_log_segment_bytes = 67108864",
        ],
        "reconsume_setup": (
            f"topics {', '.join(TOPICS)} ({QUEUES} read and write queues) and groups "
            f"{', '.join(GROUPS)} (default settings: retryMaxTimes 16) created through the name "
            "server and the broker's remoting port (reconsume.client.admin.AdminClient)"
        ),
        "loadgen_prefix": display(loadgen5_command("-", "-", log_root=Path("DIR"))[:-3]),
        "loadgen_jvm": list(LOADGEN_JVM),
        "commands": [{"case": case, "args": shlex.join(args)} for case, args in commands(sizes)],
    }


def run(
    data_root: Path,
    quick: bool = False,
    log: Callable[[str], None] = print,
    systems: Sequence[str] = SYSTEMS,
    profile: Sequence[str] = (),
    profile_dir: Path | None = None,
    invisible_ms: int | None = None,
) -> dict[str, Any]:
    """Every command against each system (``invisible_ms``: the redelivery's invisible duration
    instead of the sizes')."""
    sizes = Client5Sizes.quick() if quick else Client5Sizes.full()
    if invisible_ms is not None:
        sizes = replace(sizes, invisible_ms=invisible_ms)
    document: dict[str, Any] = {"scenario": FILE, "quick": quick, "settings": settings(sizes)}
    reason = ensure_built(log)
    if reason is not None:
        if not quick:
            raise RuntimeError(f"cannot compare with Apache RocketMQ: {reason}")
        log(f"  skipped: {reason}")
        document["skipped"] = reason
        return document
    document["versions"] = versions()
    document["runs"] = [
        run_system(system, sizes, data_root, log, profile, profile_dir) for system in systems
    ]
    return document


def _iter_rows(document: dict[str, Any]) -> Iterator[str]:
    for entry in document.get("runs", []):
        for case, result in entry["cases"].items():
            yield f"{entry['system']:9s} {case:14s} {brief(result)}"


def main(argv: list[str] | None = None) -> int:
    warn_if_plain_interpreter()
    parser = argparse.ArgumentParser(prog="python -m bench.compare_client5", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON goes to OUT/" + FILE)
    parser.add_argument("--data-dir", type=Path, help="where stores are created (OUT/data)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="which systems to run, comma-separated (default: %(default)s)",
    )
    parser.add_argument(
        "--profile",
        default="",
        help="cases during which reconsume's broker is sampled by py-spy, comma-separated "
        f"(e.g. produce-8; the stacks go to OUT/{FILE}-profile-CASE.txt)",
    )
    parser.add_argument(
        "--invisible-ms",
        type=int,
        help="the redelivery's invisible duration, at least 1000 (default: 2000; quick: 1000)",
    )
    parser.add_argument("--file", default=FILE, help=f"JSON file name under OUT ({FILE})")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    profile = [c for c in args.profile.split(",") if c]
    known = {case for case, _ in commands(Client5Sizes.full())}
    if set(profile) - known:
        parser.error(f"unknown cases {sorted(set(profile) - known)}; choose from {sorted(known)}")
    if args.invisible_ms is not None and args.invisible_ms < 1000:
        parser.error("--invisible-ms: reconsume's least invisible duration is 1000 ms")
    from bench.client5_report import render_client5  # it imports this module

    # Absolute: the Java servers run in their own directories and read their paths from there.
    data_root: Path = (args.data_dir or args.out / "data").resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started_at, load_start = time.strftime("%Y-%m-%d %H:%M:%S %z"), loadavg()
    started = time.perf_counter()
    document = run(
        data_root, args.quick, systems=systems, profile=profile, profile_dir=args.out.resolve(),
        invisible_ms=args.invisible_ms,
    )  # fmt: skip
    document["machine"] = machine_info(data_root)
    document["wall_seconds"] = time.perf_counter() - started
    document["command"] = command
    document["started"], document["finished"] = started_at, time.strftime("%Y-%m-%d %H:%M:%S %z")
    document["loadavg_start"], document["loadavg_end"] = load_start, loadavg()
    write_json(args.out / f"{args.file}.json", document)
    (args.out / f"{args.file}.md").write_text("\n".join(render_client5(document)) + "\n")
    print("\n".join(_iter_rows(document)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
