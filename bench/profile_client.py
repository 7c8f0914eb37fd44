"""Profile the broker and the client processes of one client-benchmark case with py-spy.

    python -m bench.profile_client produce --flush Async --producers 1 --seconds 10
    python -m bench.profile_client consume --messages 200000

Starts a name server and a broker as ``bench.client_throughput`` does, warms the clients up,
then samples the broker and every client process (``py-spy record --nonblocking``, Python
frames, idle time left out) for exactly the measured window and prints, per process, the
functions with the most samples on top of the stack (*self*) and on the stack at all
(*total*), as shares of that process's samples, i.e. of its CPU time. The raw stacks
(``--format raw``, one per process) are kept under ``--out`` for flame graphs.

Needs py-spy (``.venv/bin/pip install py-spy``: a tool, not a dependency of the project) and
permission to ptrace the processes (root, or ``kernel.yama.ptrace_scope`` 0).

py-spy counts a sample wherever a process is not idle, including while it is runnable but
not running and inside system calls, so a frame that wakes another process (a socket
``write``, i.e. ``Connection.send``) is over-counted on a busy 2-core machine; ``perf`` on the
same run put the broker's kernel time (socket writes, wake-ups, context switches) at about a
quarter of its CPU, against py-spy's ~35 % for ``Connection.send`` alone.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.client_throughput import (
    CONSUME_TOPIC,
    QUEUES,
    TOPIC,
    WARMUP_TOPIC,
    Worker,
    fill_consume_topics,
)
from bench.common import DEFAULT_OUT, Sizes
from bench.servers import cpu_seconds, create_topic, servers

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def _record(pid: int, output: Path, rate: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--function"),
            *("--nonblocking", "--rate", str(rate), "--output", str(output)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(recorders: list[subprocess.Popen[bytes]]) -> None:
    for recorder in recorders:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    for recorder in recorders:
        recorder.wait(60)


def _frame(frame: str) -> str:
    """``name (path:line)`` shortened to ``name (package/module.py:line)``."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")")
    for marker in ("/reconsume/", "/asyncio/", "/bench/", "/site-packages/"):
        if marker in path:
            path = marker.strip("/") + "/" + path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def summarize(raw: Path, top: int) -> list[str]:
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")]
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    if samples == 0:
        return ["  (no samples)"]
    lines = [f"  {samples} samples", "  self %  function"]
    lines += [f"  {n / samples:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += ["  total %  function"]
    lines += [f"  {n / samples:6.1%}  {f}" for f, n in total.most_common(top)]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_client", description=__doc__)
    parser.add_argument("case", choices=("produce", "consume"))
    parser.add_argument("--flush", default="Async", choices=("Async", "Sync"))
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0, help="produce: window length")
    parser.add_argument("--messages", type=int, default=200_000, help="consume: topic size")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT / "profile")
    args = parser.parse_args(argv)
    sizes = Sizes(consume_messages=args.messages, consume_warmup_messages=20_000)
    args.out.mkdir(parents=True, exist_ok=True)
    with servers(DEFAULT_OUT / "data", args.flush) as running:
        if args.case == "produce":
            import asyncio

            asyncio.run(create_topic(running.namesrv, TOPIC, QUEUES))
            command = ["produce", "--namesrv", running.namesrv, "--topic", TOPIC]
            workers = [Worker(*command, "--warmup-sends", "2000") for _ in range(args.producers)]
        else:
            fill_consume_topics(running, sizes, print)
            command = ["consume", "--namesrv", running.namesrv, "--topic", CONSUME_TOPIC]
            command += ["--total", str(args.messages), "--warmup-topic", WARMUP_TOPIC]
            workers = [Worker(*command, "--warmup-total", str(sizes.consume_warmup_messages))]
        try:
            for worker in workers:
                worker.receive(300)
            names = {running.broker.pid: "broker"}
            names.update({w.pid: f"client-{i}" for i, w in enumerate(workers)})
            raws = {pid: args.out / f"{args.case}-{name}.txt" for pid, name in names.items()}
            recorders = [_record(pid, raws[pid], args.rate) for pid in names]
            time.sleep(1.0)  # py-spy attached and sampling
            cpu = {pid: cpu_seconds(pid) for pid in names}
            started = time.monotonic()
            if args.case == "produce":
                for worker in workers:
                    worker.send({"start_at": started, "end_at": started + args.seconds})
                answers = [w.receive(args.seconds + 60) for w in workers]
                print(f"{sum(a['sends'] for a in answers) / args.seconds:,.0f} msg/s sent")
            else:
                workers[0].send({"group": "bench-profile"})
                answer = workers[0].receive(600)
                print(f"{answer['consumed'] / answer['seconds']:,.0f} msg/s consumed")
            wall = time.monotonic() - started
            cpu = {pid: cpu_seconds(pid) - before for pid, before in cpu.items()}
            _stop(recorders)
        finally:
            for worker in workers:
                worker.close()
    for pid, name in names.items():
        print(f"\n{name} (pid {pid}): {cpu[pid] / wall:.0%} of a core over {wall:.1f} s")
        print("\n".join(summarize(raws[pid], args.top)))
    print(f"\nraw stacks in {args.out}")


if __name__ == "__main__":
    main()
