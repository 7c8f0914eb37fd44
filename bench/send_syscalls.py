"""What a waiting send costs the broker process: CPU and system calls per message, 8 producer
threads (or ``--threads 1``) of Apache RocketMQ's Java client (one connection) sending
synchronously.

    python -m bench.send_syscalls --flush Sync                   # one broker, Sync flush
    python -m bench.send_syscalls --flush Async --replicated     # a master and a Sync replica
    python -m bench.send_syscalls --flush Sync --strace          # and count the syscalls
    PYTHONPATH=/tmp/before/broker_image python -m bench.send_syscalls   # another library

Starts reconsume's servers as ``bench.compare_rocketmq`` does (``bench.servers``), runs the
load generator's setup and warm-up, then its ``produce --threads 8`` (``--threads``) for
``--seconds`` and prints msg/s, the latency the load generator saw and the broker's (master's)
CPU µs per message sent, user and system apart. With ``--strace``, ``strace -c -f`` is attached
to the broker for the produce run and the calls per message of the syscalls that matter here
are printed (strace slows every call: compare the counts, not the throughput, of such runs).
Meant for before/after pairs run one after the other on the same machine.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from bench.common import DEFAULT_OUT
from bench.compare_rocketmq import CompareSizes, _loadgen, _servers, commands
from bench.servers import cpu_times

COUNTED = ("write", "read", "epoll_pwait", "futex", "fdatasync", "getpid")


def _strace_counts(path: Path) -> dict[str, int]:
    """Calls per syscall from an ``strace -c`` summary."""
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] in COUNTED and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.send_syscalls", description=__doc__)
    parser.add_argument("--flush", choices=("Async", "Sync"), default="Sync")
    parser.add_argument("--replicated", action="store_true", help="a master and a Sync replica")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, choices=(1, 8), default=8)
    parser.add_argument("--strace", action="store_true", help="count the broker's syscalls")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT / "data")
    args = parser.parse_args(argv)
    sizes = CompareSizes(produce_seconds=args.seconds)
    cases = dict(commands(sizes, args.flush, args.replicated))
    with (
        _servers("reconsume", args.out, args.flush, args.replicated) as running,
        tempfile.TemporaryDirectory() as scratch,
    ):
        log_root = running.store.parent / "client-logs"
        for case in ("setup", "warmup"):
            _loadgen(cases[case], running, log_root)
        summary = Path(scratch) / "strace.txt"
        tracer = None
        if args.strace:
            tracer = subprocess.Popen(
                ["strace", "-c", "-f", "-o", str(summary), "-p", str(running.broker.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        user, system = cpu_times(running.broker.pid)
        result = _loadgen(cases[f"produce-{args.threads}"], running, log_root)
        user_now, system_now = cpu_times(running.broker.pid)
        user, system = user_now - user, system_now - system
        cpu = user + system
        sent = int(result["sent_total"])
        print(
            f"{args.flush} flush{', Sync replica' if args.replicated else ''}, "
            f"{args.threads} thread{'s' if args.threads > 1 else ''}: "
            f"{result['msgs_per_s']:,.0f} msg/s, p50 {result['latency_p50_ms']} ms, "
            f"p99 {result['latency_p99_ms']} ms; broker CPU {cpu / sent * 1e6:.0f} µs/msg "
            f"(user {user / sent * 1e6:.0f}, system {system / sent * 1e6:.0f}; {sent:,} sent)"
        )
        if tracer is not None:
            tracer.send_signal(2)  # SIGINT: strace detaches and writes its summary
            tracer.wait(timeout=60)
            counts = _strace_counts(summary)
            print(", ".join(f"{name} {counts.get(name, 0) / sent:.2f}" for name in COUNTED))


if __name__ == "__main__":
    main()
