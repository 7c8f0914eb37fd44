"""Shared pieces of the store benchmarks: sizes, message generation, data dirs, machine facts."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reconsume.message.codec import record_size
from reconsume.message.properties import encode_properties
from reconsume.store import PutRequest
from reconsume.store.settings import GiB, MiB, StoreSettings

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "out"

TOPIC = "BenchTopic"
QUEUES = 8


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each scenario does; ``full()`` is what RESULTS.md reports."""

    body_bytes: int = 1024
    append_messages: int = 500_000
    """Messages per Async append variant."""
    sync_messages: int = 3_000
    """Messages per thread in the Sync variants."""
    read_messages: int = 500_000
    recovery_bytes: int = GiB
    segment_bytes: int = GiB
    """Commit-log segment size of the recovery scenario (the others use the default)."""
    repeats: int = 5
    """Async append and read runs are repeated; the table shows the best and the median."""
    max_message_bytes: int = 4 * MiB
    client_seconds: float = 3.0
    """Length of each produce run of the client benchmark (every producer sends for this)."""
    client_repeats: int = 5
    """Runs of each client case (produce and consume); the table shows the median and best."""
    warmup_sends: int = 1_000
    """Sends each producer process makes before its first measured run."""
    consume_messages: int = 200_000
    """Messages pre-filled in the consume topic (8 queues) and drained by each consume run."""
    consume_warmup_messages: int = 20_000
    """Messages the consumer process drains (another topic) before its first measured run."""

    @classmethod
    def full(cls) -> Sizes:
        return cls()

    @classmethod
    def quick(cls) -> Sizes:
        """Tiny sizes for the smoke test: seconds in total, numbers meaningless."""
        return cls(
            append_messages=2_000,
            sync_messages=20,
            read_messages=2_000,
            recovery_bytes=3 * MiB,
            segment_bytes=2 * MiB,
            repeats=1,
            max_message_bytes=64 * 1024,
            client_seconds=0.3,
            client_repeats=1,
            warmup_sends=20,
            consume_messages=500,
            consume_warmup_messages=100,
        )

    def settings(self, **overrides: Any) -> StoreSettings:
        base: dict[str, Any] = {"max_message_bytes": self.max_message_bytes}
        if self.segment_bytes < GiB:
            base["commit_log_segment_bytes"] = self.segment_bytes
            base["consume_queue_entries_per_file"] = 30_000
        base.update(overrides)
        return StoreSettings(**base)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def body_of(size: int) -> bytes:
    """A fixed pseudo-random body (not compressible, not all zero)."""
    return (os.urandom(64) * (size // 64 + 1))[:size]


def properties_of(index: int) -> str:
    """Properties a RocketMQ producer typically sends: tag, key, unique id, wait flag."""
    return encode_properties(
        {
            "TAGS": f"tag{index % 4}",
            "KEYS": f"key-{index:09d}",
            "UNIQ_KEY": f"7F000001000018B4AAC2{index:012X}",
            "WAIT": "true",
        }
    )


def make_requests(count: int, body: bytes, start: int = 0) -> list[PutRequest]:
    """``count`` requests round-robin over the benchmark topic's queues, sharing one body."""
    return [
        PutRequest(TOPIC, i % QUEUES, body, properties_of(i), born_timestamp_ms=1_700_000_000_000)
        for i in range(start, start + count)
    ]


def stored_size(body_bytes: int, index: int = 0) -> int:
    """Bytes one benchmark message takes in the commit log."""
    return record_size(body_bytes, len(TOPIC), len(properties_of(index).encode()))


@contextmanager
def data_dir(root: Path, name: str) -> Iterator[Path]:
    """A fresh directory under ``root`` (same disk as the repo), removed afterwards."""
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a Markdown table: ``header``, then one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _filesystem(path: Path) -> dict[str, str]:
    """Mount point, device and type of the filesystem holding ``path`` (from /proc/mounts)."""
    target = os.path.realpath(path)
    best = {"mount": "?", "device": "?", "type": "?"}
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    best_len = -1
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        device, mount, fstype = fields[0], fields[1].replace("\\040", " "), fields[2]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > best_len:
            best_len = len(mount)
            best = {"mount": mount, "device": device, "type": fstype}
    return best


def settle_disk() -> float:
    """Sync the disk before a system's servers start; the seconds it took. The system run
    before leaves its writes (and the removal of its stores) to the kernel's writeback, whose
    journal commits would otherwise slow the next system's fsyncs — under Sync flush one a
    send — and not its own."""
    started = time.perf_counter()
    os.sync()
    return time.perf_counter() - started


def loadavg() -> str:
    """1, 5 and 15 minute load averages: other work on the machine skews every timing."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def interpreter_info() -> dict[str, Any]:
    """Which CPython build runs the benchmark, and so its servers (``bench.servers`` starts
    ``reconsume`` beside ``sys.executable``): the same code runs 12 % more instructions, and
    takes 12-15 % more CPU a send under load, on a plain ``./configure`` build (no
    profile-guided optimisation or LTO, ``libpython`` a shared library called through the PLT)
    than on the optimised builds the images ship with (bench/RESULTS.md, *The interpreter the
    brokers run on*). ``make bench-venv`` builds the benchmarks' environment on one. Debian's
    build configures none of the flags (its packaging drives the optimisation) but links
    libpython in: a static libpython counts as optimised."""
    configure = str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    flags = [f for f in ("--enable-optimizations", "--with-lto") if f in configure]
    return {
        "executable": sys.executable,
        "base_executable": getattr(sys, "_base_executable", sys.executable),
        "libpython": "shared" if "libpython" in maps else "static",
        "configure_optimizations": flags,
        "optimised": bool(flags) or "libpython" not in maps,
    }


def interpreter_text(info: dict[str, Any]) -> str:
    """One line for a report: ``CPython 3.11.2 (/usr/bin/python3.11, libpython static)``."""
    interpreter = info.get("interpreter") or {}
    details = [str(interpreter.get("base_executable", "?"))]
    details.append(f"libpython {interpreter.get('libpython', '?')}")
    details += interpreter.get("configure_optimizations", [])
    return (
        f"{info.get('python_implementation', '?')} {info.get('python', '?')} ({', '.join(details)})"
    )


def machine_sentence(machine: dict[str, Any]) -> str:
    """The machine and the interpreter of a side-by-side run, for its report."""
    filesystem = machine.get("filesystem", {})
    return (
        f"Machine: {machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} cores, "
        f"{(machine.get('mem_total_bytes') or 0) / 2**30:.2f} GiB RAM, "
        f"{filesystem.get('type', '?')} on {filesystem.get('device', '?')}; every process on "
        f"this one machine, over loopback; reconsume on {interpreter_text(machine)}."
    )


def warn_if_plain_interpreter() -> None:
    """Say so on stderr when the servers will run on a plain build: their figures then
    understate the broker as its images run it."""
    info = interpreter_info()
    if not info["optimised"]:
        print(
            f"bench: {info['base_executable']} is a plain build (shared libpython, no "
            "--enable-optimizations): reconsume's servers take 12-15 % more CPU a send on it "
            "than on the images' interpreter; `make bench-venv` builds .venv-bench on an "
            "optimised one",
            file=sys.stderr,
        )


def machine_info(data_root: Path) -> dict[str, Any]:
    data_root.mkdir(parents=True, exist_ok=True)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "mem_total_bytes": _mem_total_bytes(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "interpreter": interpreter_info(),
        "platform": platform.platform(),
        "data_dir": str(data_root),
        "filesystem": _filesystem(data_root),
    }


def write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
