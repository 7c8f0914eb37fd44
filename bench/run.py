"""Run the benchmarks, write JSON under ``--out`` and optionally render RESULTS.md.

python -m bench.run --write bench/RESULTS.md      # full sizes (what `make bench` runs)
python -m bench.run --quick --out /tmp/bench      # seconds; the smoke test runs this
python -m bench.run --scenarios append --messages 200000 --append-variants async-put
python -m bench.run --scenarios client --write bench/RESULTS.md   # the client part only
python -m bench.run --scenarios rocketmq --write bench/RESULTS.md # vs Apache RocketMQ only

A run of some scenarios keeps the results of the others already in ``--out`` (from a run of the
same kind, full or quick), so RESULTS.md still shows them, each with the command that made it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from bench import client_throughput, compare_rocketmq, store_append, store_read, store_recovery
from bench.common import (
    DEFAULT_OUT,
    Sizes,
    loadavg,
    machine_info,
    warn_if_plain_interpreter,
    write_json,
)
from bench.report import FILES, load_run, render

SCENARIOS = ("append", "read", "recovery", "client", "rocketmq")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--write", type=Path, metavar="MD", help="render the results to MD")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="directory for JSON results (bench/out)"
    )
    parser.add_argument(
        "--data-dir", type=Path, help="where stores are created (default: OUT/data); removed after"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {','.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--append-variants",
        default=",".join(store_append.ASYNC_VARIANTS + store_append.SYNC_VARIANTS),
        help="comma-separated append variants",
    )
    parser.add_argument("--messages", type=int, help="messages per Async append run")
    parser.add_argument("--sync-messages", type=int, help="messages per thread in Sync runs")
    parser.add_argument("--read-messages", type=int, help="messages stored for the read test")
    parser.add_argument("--recovery-bytes", type=int, help="commit-log bytes for recovery")
    parser.add_argument("--segment-bytes", type=int, help="commit-log segment size (recovery)")
    parser.add_argument("--body-bytes", type=int, help="message body size (1024)")
    parser.add_argument("--repeats", type=int, help="runs of each Async/read measurement")
    parser.add_argument("--client-seconds", type=float, help="length of each produce run (3)")
    parser.add_argument("--client-repeats", type=int, help="runs of each client case (5)")
    parser.add_argument(
        "--consume-messages", type=int, help="messages each consume run drains (200000)"
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="do not run anything: render --write from the JSON already in --out",
    )
    return parser.parse_args(argv)


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes.full()
    overrides = {
        "append_messages": args.messages,
        "sync_messages": args.sync_messages,
        "read_messages": args.read_messages,
        "recovery_bytes": args.recovery_bytes,
        "segment_bytes": args.segment_bytes,
        "body_bytes": args.body_bytes,
        "repeats": args.repeats,
        "client_seconds": args.client_seconds,
        "client_repeats": args.client_repeats,
        "consume_messages": args.consume_messages,
    }
    return dataclasses.replace(sizes, **{k: v for k, v in overrides.items() if v is not None})


def _earlier_sections(out: Path, quick: bool, scenarios: list[str]) -> dict[str, Any]:
    """Run facts of the scenarios an earlier run left in ``out`` and this one does not redo."""
    try:
        earlier = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    if earlier.get("quick") != quick:
        return {}
    sections = earlier.get("sections") or {}
    kept: dict[str, Any] = {}
    for scenario in earlier.get("scenarios", []):
        if scenario in scenarios or scenario not in FILES:
            continue
        if (out / f"{FILES[scenario]}.json").exists():
            kept[scenario] = sections.get(scenario) or {
                key: earlier.get(key)
                for key in ("command", "started", "finished", "loadavg_start", "loadavg_end")
            }
    return kept


def main(argv: list[str] | None = None) -> int:
    warn_if_plain_interpreter()
    args = _parse(argv)
    out: Path = args.out
    if args.render_only:
        if args.write is None:
            raise SystemExit("--render-only needs --write")
        args.write.write_text(render(load_run(out)))
        print(f"wrote {args.write}")
        return 0
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    variants = tuple(v.strip() for v in args.append_variants.split(",") if v.strip())
    sizes = _sizes(args)
    data_root: Path = args.data_dir or out / "data"
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    run_info: dict[str, Any] = {
        "command": command,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "quick": args.quick,
        "sizes": sizes.as_dict(),
        "scenarios": scenarios,
        "machine": machine_info(data_root),
        "loadavg_start": loadavg(),
    }
    print(f"benchmark: {', '.join(scenarios)} ({'quick' if args.quick else 'full'} sizes)")
    sections = _earlier_sections(out, args.quick, scenarios)
    for scenario in scenarios:
        print(f"{scenario}:")
        section = {
            "command": command,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "loadavg_start": loadavg(),
        }
        started = time.perf_counter()
        if scenario == "append":
            result = store_append.run(sizes, data_root, variants)
        elif scenario == "read":
            result = store_read.run(sizes, data_root)
        elif scenario == "recovery":
            result = store_recovery.run(sizes, data_root)
        elif scenario == "rocketmq":
            result = compare_rocketmq.run(data_root, quick=args.quick)
        else:
            result = client_throughput.run(sizes, data_root)
        result["wall_seconds"] = time.perf_counter() - started
        section["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
        section["loadavg_end"] = loadavg()
        sections[scenario] = section
        write_json(out / f"{FILES[scenario]}.json", result)
    run_info["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    run_info["loadavg_end"] = loadavg()
    run_info["scenarios"] = [s for s in SCENARIOS if s in sections]
    run_info["sections"] = sections
    write_json(out / "run.json", run_info)
    if args.write is not None:
        args.write.write_text(render(load_run(out)))
        print(f"wrote {args.write}")
    print(f"JSON results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
