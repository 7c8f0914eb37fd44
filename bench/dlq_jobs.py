"""Throughput of the dead-letter jobs (``reconsume dlq drain|reprocess|purge``) on Spark.

    .venv/bin/python -m bench.dlq_jobs --write-json bench/out/dlq_jobs.json   # 1,000,000 a case
    .venv/bin/python -m bench.dlq_jobs --quick                                # 5,000: a smoke run

Real ``reconsume namesrv`` and two ``reconsume broker`` processes on 127.0.0.1 (``bench.servers``:
Sync flush, 64 MiB commit-log segments, fresh stores removed afterwards); Spark ``local[2]`` in
this process (driver memory 2g), the jobs run by ``reconsume.spark.jobs.main.run`` on that
session, as ``reconsume dlq`` runs them.

Each case has a consumer group of its own whose ``%DLQ%<group>`` (1 queue on each broker) is
filled first, unmeasured: ``messages`` dead letters sent straight to the dead-letter topic by
the Producer (``send_batch``, several batches in flight, alternating brokers), each with a
random, incompressible body and the properties a broker's send-back gives a dead letter
(DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID, RECONSUME_DLQ_TIME, RECONSUME_DLQ_REASON,
RECONSUME_TIME, RETRY_TOPIC, ORIGIN_MESSAGE_ID, DELAY, a tag and a key). One in ten carries the
tag ``timeout``, the others ``invalid``. The cases, in this order:

* read: ``spark.read.format("reconsume")`` of the drain case's dead letters, ``count()``; the
  source's read throughput alone (nothing committed).
* drain: everything archived to Parquet (partitioned by dead-letter date); archive size on disk.
* reprocess: everything re-sent to its origin topic (4 queues on each broker).
* reprocess-filtered: ``--filter "tags = 'timeout'"``: a tenth re-sent, the rest kept (sent back
  to the dead-letter topic).
* purge: no filter, so only the jobs' offsets move.

A small unmeasured drain (``warmup_messages``) runs first so that the first measured job does not
pay for the JVM's and the Python workers' start. Every job's result must say Succeeded with
exactly the counts the fill implies, and the queues must be handled afterwards; otherwise the
benchmark stops with an error. CPU: the brokers' (from /proc), this process's (the driver: py4j,
planning, ledger), the JVM's and the Spark Python workers' (every descendant process, from
/proc), per message.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_OUT,
    data_dir,
    loadavg,
    machine_info,
    warn_if_plain_interpreter,
    write_json,
)
from bench.servers import BROKER_NAME, cpu_seconds, servers, small_segments_config, start_broker
from bench.spark_standalone import standalone_cluster
from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message import properties as props
from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig, TopicConfig
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_job_group, dead_letter_topic

ORIGIN_TOPIC = "BenchOrders"
ORIGIN_QUEUES = 4
"""Queues of the origin topic on each broker (where reprocess sends)."""
DLQ_QUEUES = 1
"""Queues of each %DLQ%<group> on each broker."""
MATCH_TAG = "timeout"
OTHER_TAG = "invalid"
MATCH_EVERY = 10
FILTER = f"tags = '{MATCH_TAG}'"
FILL_BATCH = 128
FILL_IN_FLIGHT = 8
RECONSUME_TIMES = 16
DRIVER_MEMORY = "2g"
MASTER = "local[2]"
STANDALONE = re.compile(r"^standalone:([1-9][0-9]?)$")
"""``--master standalone:N``: a Spark standalone master and N one-core workers on 127.0.0.1."""
EXECUTOR_MEMORY = "1g"
WORKER_MEMORY = "2g"
CASES = ("read", "drain", "reprocess", "reprocess-filtered", "purge")
PY_SPY = Path(sys.executable).with_name("py-spy")


@dataclass(frozen=True, slots=True)
class Sizes:
    messages: int = 1_000_000
    body_bytes: int = 1024
    warmup_messages: int = 20_000

    @classmethod
    def quick(cls) -> Sizes:
        """The smoke run: seconds, numbers meaningless."""
        return cls(messages=5_000, warmup_messages=500)


def log(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------------- servers
@contextmanager
def two_brokers(data_root: Path) -> Iterator[str]:
    """A name server and two Sync-flush brokers (``bench.servers``); yields the name server."""
    with ExitStack() as stack:
        running = stack.enter_context(servers(data_root, "Sync", name="dlq-jobs"))
        directory = stack.enter_context(data_dir(data_root, "dlq-jobs-b"))
        second = start_broker(
            running.namesrv, directory / "store", small_segments_config(directory),
            f"{BROKER_NAME}-b", "--cluster", "bench", "--flush", "Sync",
        )  # fmt: skip
        stack.callback(second.stop)
        asyncio.run(_registered(running.namesrv, 2))
        yield running.namesrv


async def _registered(namesrv: str, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with AdminClient([namesrv]) as admin:
        while len([b for b in await admin.brokers() if b.master]) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} brokers not registered with {namesrv}")
            await asyncio.sleep(0.05)


def server_pids(namesrv: str) -> list[int]:
    """Pids of the broker processes (children of this process running ``reconsume broker``)."""
    found = []
    for pid, (_, ppid) in _processes().items():
        if ppid != os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"broker" in argv and namesrv.encode() in argv:
            found.append(pid)
    return sorted(found)


# ---------------------------------------------------------------------- CPU of the process tree
def _processes() -> dict[int, tuple[str, int]]:
    """pid -> (command name, parent pid) of every process /proc shows."""
    table: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        head, _, rest = stat.rpartition(")")
        table[int(entry.name)] = (head.partition("(")[2], int(rest.split()[1]))
    return table


def spark_cpu(exclude: set[int]) -> dict[str, float]:
    """CPU seconds used so far by this process's descendants other than ``exclude`` (the
    brokers), split into the JVM and the Spark Python workers (and their daemons)."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    totals = {"jvm": 0.0, "python_workers": 0.0}
    stack = list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        if pid in exclude:
            continue
        stack.extend(children.get(pid, []))
        name = table[pid][0]
        if name == "java":
            totals["jvm"] += cpu_seconds(pid)
        elif name.startswith("python") or name.startswith("pyspark"):
            totals["python_workers"] += cpu_seconds(pid)
    return totals


class CpuMeter:
    """CPU seconds of the brokers, the driver (this process), the JVM and the Python workers
    over a stretch of time."""

    def __init__(self, brokers: list[int]) -> None:
        self.brokers = brokers

    def sample(self) -> dict[str, float]:
        return {
            "brokers": sum(cpu_seconds(pid) for pid in self.brokers),
            "driver": time.process_time(),
            **spark_cpu(set(self.brokers)),
        }

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        # Python workers that exited in between are lost; with worker reuse (the default) the
        # same ones run every task.
        return {k: round(max(0.0, after[k] - before[k]), 2) for k in before}


# ---------------------------------------------------------------------- filling
def dead_letter(index: int, group: str, body: bytes, now_ms: int) -> Message:
    """Dead letter ``index`` of ``group`` as a broker's send-back stores it."""
    origin_id = f"7F000001000018B4AAC2{index:012X}"
    message = Message(dead_letter_topic(group), body, {
        props.RETRY_TOPIC: ORIGIN_TOPIC,
        props.ORIGIN_MESSAGE_ID: f"7F00000100002A9F{index:016X}",
        props.RECONSUME_TIME: str(RECONSUME_TIMES),
        props.DELAY_TIME_LEVEL: "0",
        props.DLQ_ORIGIN_TOPIC: ORIGIN_TOPIC,
        props.DLQ_ORIGIN_MESSAGE_ID: origin_id,
        props.DLQ_TIME_MS: str(now_ms),
        props.DLQ_REASON: "MAX_RECONSUME_TIMES",
    })  # fmt: skip
    message.tags = MATCH_TAG if index % MATCH_EVERY == 0 else OTHER_TAG
    message.keys = [f"order-{index}"]
    return message


def matching(count: int) -> int:
    """How many of ``count`` dead letters the filter matches."""
    return len(range(0, count, MATCH_EVERY))


async def prepare(namesrv: str, group: str) -> None:
    """The group, its dead-letter topic (1 queue on each broker) and the origin topic."""
    async with AdminClient([namesrv]) as admin:
        brokers = [b.master for b in await admin.brokers() if b.master]
        await admin.create_group(SubscriptionGroupConfig(group), brokers=brokers)
        dlq = dead_letter_topic(group)
        await admin.update_topic(TopicConfig(dlq, DLQ_QUEUES, DLQ_QUEUES, PERM_READ_WRITE),
                                 brokers=brokers)  # fmt: skip
        await admin.create_topic(ORIGIN_TOPIC, queues=ORIGIN_QUEUES, brokers=brokers)
        for topic, queues in ((dlq, DLQ_QUEUES), (ORIGIN_TOPIC, ORIGIN_QUEUES)):
            deadline = time.monotonic() + 30
            while True:
                route = await admin.route(topic)
                if route is not None and len(route.write_queues) == queues * len(brokers):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic} not routed on {len(brokers)} brokers")
                await asyncio.sleep(0.05)


async def fill(namesrv: str, group: str, count: int, body_bytes: int) -> float:
    """Store ``count`` dead letters in ``%DLQ%<group>``; returns the seconds it took."""
    await prepare(namesrv, group)
    rng = random.Random(group)
    now_ms = time.time_ns() // 1_000_000
    started = time.perf_counter()
    async with AdminClient([namesrv]) as admin:
        route = await admin.route(dead_letter_topic(group))
        assert route is not None
        queues = sorted(route.write_queues, key=lambda q: (q.broker_name, q.queue_id))
    async with Producer([namesrv], "bench-dlq-fill") as producer:
        starts = iter(range(0, count, FILL_BATCH))

        async def sender() -> None:
            for start in starts:  # shared: each batch is taken by one sender
                batch = [
                    dead_letter(i, group, rng.randbytes(body_bytes), now_ms)
                    for i in range(start, min(count, start + FILL_BATCH))
                ]
                queue = queues[(start // FILL_BATCH) % len(queues)]
                await producer.send_batch(batch, queue=queue)

        await asyncio.gather(*(sender() for _ in range(FILL_IN_FLIGHT)))
    return time.perf_counter() - started


async def backlog(namesrv: str, group: str) -> int:
    """Dead letters of ``group`` no job has handled (as tests/spark/dead_letters.py counts)."""
    async with AdminClient([namesrv]) as admin:
        topic = dead_letter_topic(group)
        route = await admin.route(topic)
        if route is None:
            return 0
        total = 0
        for broker in sorted({q.broker_name for q in route.read_queues}):
            address = route.master_of(broker)
            assert address is not None
            queues = sum(1 for q in route.read_queues if q.broker_name == broker)
            total += await admin.broker_depth(address, topic, queues,
                                              group=dead_letter_job_group(group))  # fmt: skip
        return total


async def topic_depth(namesrv: str, topic: str) -> int:
    async with AdminClient([namesrv]) as admin:
        return await admin.topic_depth(topic)


# ---------------------------------------------------------------------- Spark
def spark_session(
    master: str = MASTER, driver_memory: str = DRIVER_MEMORY, cores_max: int | None = None
) -> Any:
    """The benchmark's SparkSession (the Python workers run this interpreter); with a
    ``spark://`` master, executors of one core and ``executor_memory`` each, ``cores_max``
    cores in all."""
    from pyspark.sql import SparkSession

    from reconsume.spark.source import ReconsumeDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver JVM binds loopback only
    session = (
        SparkSession.builder.master(master)
        .appName("reconsume-bench-dlq-jobs")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("spark://"):
        session = (
            session.config("spark.executor.cores", "1")
            .config("spark.executor.memory", EXECUTOR_MEMORY)
            .config("spark.cores.max", str(cores_max or 1))
            .config("spark.default.parallelism", str(cores_max or 1))
        )
    session = session.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(ReconsumeDataSource)
    return session


def spark_facts(spark: Any) -> dict[str, Any]:
    conf = spark.sparkContext.getConf()
    return {
        "version": spark.version,
        "master": spark.sparkContext.master,
        "default_parallelism": spark.sparkContext.defaultParallelism,
        "driver_memory": conf.get("spark.driver.memory", "1g (default)"),
    }


def expected_counts(case: str, messages: int) -> dict[str, int]:
    counts = dict.fromkeys(("read", "matched", "archived", "resent", "purged", "kept",
                            "skipped"), 0)  # fmt: skip
    matched = matching(messages) if case == "reprocess-filtered" else messages
    counts.update(read=messages, matched=matched)
    if case == "drain":
        counts["archived"] = messages
    elif case == "reprocess":
        counts["resent"] = messages
    elif case == "reprocess-filtered":
        counts.update(resent=matched, kept=messages - matched)
    elif case == "purge":
        counts["purged"] = messages
    return counts


class BenchmarkFailed(RuntimeError):
    """A job did not do what the fill implies."""


def _check(what: str, got: Any, wanted: Any) -> None:
    if got != wanted:
        raise BenchmarkFailed(f"{what}: got {got}, wanted {wanted}")


def run_job(
    spark: Any, namesrv: str, case: str, group: str, archive: Path | None
) -> dict[str, Any]:
    """One job run; its result dict and wall seconds (planning to the offsets moved)."""
    from reconsume.spark.jobs.main import run
    from reconsume.spark.jobs.params import Action, JobParams

    action = {"drain": Action.DRAIN, "purge": Action.PURGE}.get(case, Action.REPROCESS)
    params = JobParams(
        action=action,
        name_servers=(namesrv,),
        group=group,
        job=f"bench-{case}-{group}",
        filter=FILTER if case == "reprocess-filtered" else None,
        sink_path=str(archive) if archive is not None else None,
        master=spark.sparkContext.master,
    )
    started = time.perf_counter()
    result = run(params, spark)
    seconds = time.perf_counter() - started
    document = result.to_dict()
    if document["phase"] != "Succeeded":
        raise BenchmarkFailed(f"{case} of {group}: {document}")
    return {"seconds": seconds, "result": document}


def read_count(spark: Any, namesrv: str, group: str) -> int:
    frame = (
        spark.read.format("reconsume")
        .option("nameServer", namesrv)
        .option("deadLetterGroup", group)
        .load()
    )
    return int(frame.count())


def directory_size(path: Path) -> tuple[int, int]:
    """(bytes, data files) under ``path``."""
    total = files = 0
    for entry in path.rglob("*"):
        if entry.is_file():
            total += entry.stat().st_size
            if not entry.name.startswith((".", "_")):
                files += 1
    return total, files


@contextmanager
def profiled(directory: Path | None, name: str) -> Iterator[None]:
    """py-spy on this process and its descendants (brokers, Python workers) for the block:
    collapsed stacks in ``directory/name.txt``. Nothing without a directory."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [str(PY_SPY), "record", "--pid", str(os.getpid()), "--subprocesses", "--format", "raw",
         "--rate", "50", "--output", str(directory / f"{name}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)


# ---------------------------------------------------------------------- the run
def measure(
    namesrv: str,
    spark: Any,
    sizes: Sizes,
    work: Path,
    *,
    cases: tuple[str, ...] = CASES,
    tag: str = "",
    profile: Path | None = None,
    report: Callable[[str], None] = log,
) -> dict[str, Any]:
    """Fill and run every case against the servers of ``namesrv``; the results."""
    brokers = server_pids(namesrv)
    meter = CpuMeter(brokers)
    group_of = {case: f"bench-dlq-{case.replace('-filtered', '-f')}{tag}" for case in CASES}
    group_of["read"] = group_of["drain"]
    results: list[dict[str, Any]] = []
    if sizes.warmup_messages > 0:
        group = f"bench-dlq-warmup{tag}"
        asyncio.run(fill(namesrv, group, sizes.warmup_messages, sizes.body_bytes))
        warm = run_job(spark, namesrv, "drain", group, work / "warmup-archive")
        report(f"  warm-up: drain of {sizes.warmup_messages:,} in {warm['seconds']:.1f} s")
        shutil.rmtree(work / "warmup-archive", ignore_errors=True)
    for case in cases:
        group = group_of[case]
        row: dict[str, Any] = {"case": case, "group": group, "messages": sizes.messages}
        if case != "drain" or "read" not in cases:
            fill_s = asyncio.run(fill(namesrv, group, sizes.messages, sizes.body_bytes))
            row["fill_seconds"] = round(fill_s, 2)
            report(f"  {case}: {sizes.messages:,} dead letters stored in {fill_s:.1f} s "
                   f"({sizes.messages / fill_s:,.0f} msg/s)")  # fmt: skip
        _check(f"{case}: backlog before", asyncio.run(backlog(namesrv, group)), sizes.messages)
        origin_before = asyncio.run(topic_depth(namesrv, ORIGIN_TOPIC))
        archive = work / f"archive-{case}" if case == "drain" else None
        row["loadavg_start"] = loadavg()
        before = meter.sample()
        with profiled(profile, case):
            if case == "read":
                started = time.perf_counter()
                count = read_count(spark, namesrv, group)
                seconds = time.perf_counter() - started
                _check("read: rows counted", count, sizes.messages)
            else:
                job = run_job(spark, namesrv, case, group, archive)
                seconds = job["seconds"]
                row["result"] = job["result"]
        row["cpu_seconds"] = CpuMeter.delta(before, meter.sample())
        row["loadavg_end"] = loadavg()
        row["seconds"] = round(seconds, 3)
        row["msgs_per_s"] = round(sizes.messages / seconds, 1)
        row["cpu_us_per_msg"] = {
            k: round(v * 1e6 / sizes.messages, 1) for k, v in row["cpu_seconds"].items()
        }
        if case != "read":
            counts = row["result"]["counts"]
            _check(f"{case}: result counts", counts, expected_counts(case, sizes.messages))
            left = asyncio.run(backlog(namesrv, group))
            kept = counts["kept"]
            _check(f"{case}: backlog after (the kept ones, sent back)", left, kept)
            resent = asyncio.run(topic_depth(namesrv, ORIGIN_TOPIC)) - origin_before
            _check(f"{case}: messages added to {ORIGIN_TOPIC}", resent, counts["resent"])
        if archive is not None:
            size, files = directory_size(archive)
            row["archive_bytes"] = size
            row["archive_files"] = files
            rows = spark.read.parquet(str(archive)).count()
            _check("drain: rows in the archive", rows, sizes.messages)
            shutil.rmtree(archive, ignore_errors=True)
        extra = ""
        if "archive_bytes" in row:
            mib = row["archive_bytes"] / 2**20
            extra = f", archive {mib:,.1f} MiB in {row['archive_files']} files"
        report(f"  {case}: {sizes.messages:,} in {seconds:.2f} s = {row['msgs_per_s']:,.0f} msg/s"
               f"{extra}; CPU s {row['cpu_seconds']}")  # fmt: skip
        results.append(row)
    return {
        "scenario": "dlq_jobs",
        "sizes": asdict(sizes),
        "filter": FILTER,
        "fill_batch": FILL_BATCH,
        "fill_in_flight": FILL_IN_FLIGHT,
        "origin_queues_per_broker": ORIGIN_QUEUES,
        "dlq_queues_per_broker": DLQ_QUEUES,
        "brokers": len(brokers),
        "spark": spark_facts(spark),
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    warn_if_plain_interpreter()
    parser = argparse.ArgumentParser(
        prog="python -m bench.dlq_jobs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--messages", type=int, help="dead letters per case (1,000,000)")
    parser.add_argument("--body-bytes", type=int, help="message body size (1024)")
    parser.add_argument("--warmup-messages", type=int, help="dead letters of the warm-up drain")
    parser.add_argument("--quick", action="store_true", help="5,000 messages: a smoke run")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset")
    parser.add_argument("--driver-memory", default=DRIVER_MEMORY, help="spark.driver.memory")
    parser.add_argument(
        "--master",
        default=MASTER,
        help="local[N], or standalone:N for a Spark standalone master with N one-core workers "
        f"started here (default {MASTER})",
    )
    parser.add_argument("--write-json", type=Path, metavar="JSON", help="write the results here")
    parser.add_argument(
        "--data-dir", type=Path, help="where stores and archives go (default: bench/out/data)"
    )
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="py-spy each case (stacks in DIR; slower)"
    )
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    overrides = {"messages": args.messages, "body_bytes": args.body_bytes,
                 "warmup_messages": args.warmup_messages}  # fmt: skip
    sizes = replace(sizes, **{k: v for k, v in overrides.items() if v is not None})
    chosen = {c.strip() for c in args.cases.split(",") if c.strip()}
    unknown = chosen - set(CASES)
    if unknown:
        raise SystemExit(f"unknown cases: {', '.join(sorted(unknown))}")
    cases = tuple(c for c in CASES if c in chosen)  # read first: it reads the drain's
    data_root: Path = args.data_dir or DEFAULT_OUT / "data"
    command = " ".join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    document: dict[str, Any] = {
        "command": command,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "loadavg_start": loadavg(),
        "machine": machine_info(data_root),
    }
    log(f"dead-letter jobs: {sizes.messages:,} dead letters of {sizes.body_bytes} B per case")
    standalone = STANDALONE.match(args.master)
    if standalone is None and not args.master.startswith("local"):
        raise SystemExit(f"--master {args.master}: local[N] or standalone:N")
    with ExitStack() as stack:
        namesrv = stack.enter_context(two_brokers(data_root))
        work = stack.enter_context(data_dir(data_root, "dlq-jobs-work"))
        master, cores_max = args.master, None
        if standalone is not None:
            workers = int(standalone.group(1))
            cluster = stack.enter_context(standalone_cluster(
                work / "spark", workers=workers, memory=WORKER_MEMORY))  # fmt: skip
            master, cores_max = cluster.master_url, cluster.cores
            document["standalone"] = {"workers": workers, "cores_per_worker": 1,
                                      "worker_memory": WORKER_MEMORY,
                                      "executor_memory": EXECUTOR_MEMORY}  # fmt: skip
        spark = spark_session(master, args.driver_memory, cores_max)
        try:
            document.update(measure(namesrv, spark, sizes, work, cases=cases,
                                    profile=args.profile))  # fmt: skip
        finally:
            spark.stop()
    document["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    document["loadavg_end"] = loadavg()
    if args.write_json is not None:
        write_json(args.write_json, document)
        log(f"wrote {args.write_json}")
    else:
        print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
