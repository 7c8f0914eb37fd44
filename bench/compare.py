"""A/B an append variant between two copies of the library, alternating runs.

    git archive HEAD broker_image | tar -x -C /tmp/before
    python -m bench.compare --before /tmp/before/broker_image --rounds 8
    python -m bench.compare --before /tmp/before/broker_image --instructions   # valgrind

On a shared or virtual machine single runs vary by ±30 %; alternating before/after in
separate processes and comparing the *minimum* (the least disturbed run) and the median of
many runs is what the numbers in bench/CHANGES.md come from.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import BENCH_DIR, median


def _run(pythonpath: str, variant: str, messages: int, repeats: int) -> tuple[list[float], ...]:
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(BENCH_DIR.parent)) if p)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.run",
                "--scenarios",
                "append",
                "--append-variants",
                variant,
                "--messages",
                str(messages),
                "--repeats",
                str(repeats),
                "--out",
                out,
                "--data-dir",
                str(BENCH_DIR / "out" / "data"),
            ],
            cwd=BENCH_DIR.parent,
            env=env,
            check=True,
            capture_output=True,
        )
        row = json.loads((Path(out) / "store_append.json").read_text())["results"][0]
    n = row["messages"]
    wall = [n / s for s in row["runs_seconds"]]
    cpu = [s / n * 1e6 for s in row["runs_cpu_seconds"]]
    return wall, cpu


def _instructions(pythonpath: str, messages: int, batch: bool) -> int:
    """Instructions per message under cachegrind: a run of ``bench.append_loop`` minus its dry
    run (same requests prepared, nothing appended). Needs valgrind; deterministic to ~0.3 %."""

    def count(*extra: str) -> int:
        env = dict(os.environ, PYTHONHASHSEED="0")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(BENCH_DIR.parent)) if p)
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                sys.executable,
                "-m",
                "bench.append_loop",
                str(messages),
                *(["--batch"] if batch else []),
                *extra,
            ],
            cwd=BENCH_DIR.parent,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        line = next(x for x in done.stderr.splitlines() if "I   refs:" in x)
        return int(line.split()[-1].replace(",", ""))

    return (count() - count("--dry")) // messages


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("--before", required=True, help="broker_image dir of the old library")
    parser.add_argument("--after", default="", help="broker_image dir of the new one (this)")
    parser.add_argument("--variants", default="async-put-prefaulted,async-put_batch32-prefaulted")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per message (valgrind) instead of timing: put and put_batch",
    )
    args = parser.parse_args()
    if args.instructions:
        n = min(args.messages, 10_000)
        for batch in (False, True):
            name = "put_batch(32)" if batch else "put"
            before = _instructions(args.before, n, batch)
            after = _instructions(args.after, n, batch)
            print(
                f"{name}: before {before:,} instructions/msg, after {after:,} "
                f"({(after - before) / before:+.1%})"
            )
        return
    for variant in args.variants.split(","):
        got: dict[str, tuple[list[float], list[float]]] = {"before": ([], []), "after": ([], [])}
        for _ in range(args.rounds):
            for label, path in (("before", args.before), ("after", args.after)):
                wall, cpu = _run(path, variant, args.messages, args.repeats)
                got[label][0].extend(wall)
                got[label][1].extend(cpu)
        print(f"{variant} ({args.rounds * args.repeats} runs each, {args.messages:,} messages):")
        for label, (wall, cpu) in got.items():
            print(
                f"  {label:6s} msg/s best {max(wall):>9,.0f} median {median(wall):>9,.0f}   "
                f"CPU µs/msg best {min(cpu):5.2f} median {median(cpu):5.2f}"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
