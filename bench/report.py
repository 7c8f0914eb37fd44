"""Render bench/RESULTS.md from the JSON a run wrote (plus the hand-kept bench/CHANGES.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.client_report import render_client
from bench.common import BENCH_DIR, interpreter_text, markdown_table
from bench.rocketmq_report import render_rocketmq

CHANGES = BENCH_DIR / "CHANGES.md"
TARGET_ASYNC_MSGS_PER_S = 200_000
TARGET_RECOVERY_S = 2.0
FILES = {
    "append": "store_append",
    "read": "store_read",
    "recovery": "store_recovery",
    "client": "client_throughput",
    "rocketmq": "compare_rocketmq",
}
"""Scenario → the JSON file (without .json) its results are written to."""


def load_run(out: Path) -> dict[str, Any]:
    """run.json and the scenario results it lists."""
    run_info = json.loads((out / "run.json").read_text())
    loaded: dict[str, Any] = {"run": run_info}
    for scenario in run_info["scenarios"]:
        loaded[scenario] = json.loads((out / f"{FILES[scenario]}.json").read_text())
    return loaded


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _bytes(value: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size * 0.999:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def _machine(run_info: dict[str, Any]) -> list[str]:
    m = run_info["machine"]
    fs = m["filesystem"]
    mem = m.get("mem_total_bytes")
    return markdown_table(
        ["", ""],
        [
            ["CPU", m["cpu_model"]],
            ["Cores", f"{m['cpu_count']} ({m['usable_cpus']} usable by this process)"],
            ["RAM", _bytes(mem) if mem else "?"],
            ["Python", interpreter_text(m)],
            ["OS", m["platform"]],
            ["Data dir", f"`{m['data_dir']}`"],
            ["Filesystem", f"{fs['type']} on {fs['device']} (mounted at {fs['mount']})"],
            [
                "Load average",
                f"{run_info.get('loadavg_start', '?')} at the start, "
                f"{run_info.get('loadavg_end', '?')} at the end (1, 5, 15 min)",
            ],
        ],
    )


def _append(result: dict[str, Any]) -> list[str]:
    rows = []
    for r in result["results"]:
        sync = r["flush_mode"] == "Sync"
        rows.append(
            [
                r["variant"],
                r["flush_mode"],
                str(r["threads"]),
                str(r["batch"]),
                _n(r["messages"]),
                _n(r["msgs_per_s"]),
                _n(r.get("msgs_per_s_best", r["msgs_per_s"])),
                _n(r["mb_per_s"], 1),
                f"{r['cpu_us_per_msg']:.2f}" if not sync else "-",
                f"{r['fsyncs_per_put']:.3f}" if sync else "-",
                f"{r['latency_p50_ms']:.2f} / {r['latency_p99_ms']:.2f}" if sync else "-",
            ]
        )
    lines = [
        f"{result['body_bytes']} B bodies, {result['record_bytes']} B stored per record "
        "(8 queues of one topic, 4 properties). Async rows: median of the runs (best next to "
        "it); *CPU µs/msg* is the calling thread's CPU time per put (less sensitive to other "
        "load on the machine than wall time). Sync rows: one run. *fsync rounds/put* counts "
        "group-commit flushes (each one fdatasync of the active segment) per acknowledged put.",
        "",
    ]
    return lines + markdown_table(
        [
            "variant",
            "flush",
            "threads",
            "batch",
            "messages",
            "msg/s",
            "best msg/s",
            "MB/s",
            "CPU µs/msg",
            "fsync rounds/put",
            "latency p50 / p99 ms",
        ],
        rows,
    )


def _read(result: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["variant"],
            str(r["queues"]),
            _n(r["messages"]),
            _n(r["calls"]),
            f"{r['seconds']:.3f}",
            _n(r["msgs_per_s"]),
            _n(r["msgs_per_s_best"]),
            _n(r["mb_per_s"], 1),
        ]
        for r in result["results"]
    ]
    return [
        "Every queue read from offset 0 to its end, 32 records a call, warm page cache; "
        "median of the passes.",
        "",
        *markdown_table(
            ["variant", "queues", "messages", "calls", "seconds", "msg/s", "best msg/s", "MB/s"],
            rows,
        ),
    ]


def _checkpoint_lag(result: dict[str, Any]) -> str:
    first = result["results"][0]
    if first["checkpoint_offset"] is None:
        return "(none)"
    behind = result["log_bytes"] - first["checkpoint_offset"]
    return f"{_bytes(behind)} ({_n(first['records_scanned'])} records)"


def _recovery(result: dict[str, Any]) -> list[str]:
    writer = result["writer"]
    rows = []
    for r in result["results"]:
        scan = r["scan_seconds"]
        rows.append(
            [
                r["variant"],
                f"{r['open_seconds']:.3f}",
                f"{scan:.3f}",
                _n(r["records_scanned"]),
                _bytes(r["bytes_scanned"]),
                _n(r["bytes_scanned"] / scan / 1e6, 0) if scan > 0 else "-",
                _n(r["records_scanned"] / scan) if scan > 0 else "-",
                _n(r["entries_dropped"]),
            ]
        )
    floor = result.get("crc_floor")
    if floor:
        rows.append(
            [
                "floor: crc32 of every body alone (no store)",
                "-",
                f"{floor['walk_crc_seconds']:.3f}",
                _n(floor["records"]),
                _bytes(result["log_bytes"]),
                _n(result["log_bytes"] / floor["walk_crc_seconds"] / 1e6, 0),
                _n(floor["records"] / floor["walk_crc_seconds"]),
                "-",
            ]
        )
    full = result["results"][-1]
    notes: list[str] = []
    if floor and full["records_scanned"]:
        per_record = full["scan_seconds"] / full["records_scanned"] * 1e6
        crc_share = floor["crc_all_bytes_seconds"] / full["scan_seconds"]
        notes = [
            "",
            f"A full scan costs {per_record:.1f} µs per record; crc32 of the bytes themselves "
            f"is {crc_share:.0%} of it. The rest is per-record Python work in recovery "
            "(`check_record`, `peek_routing`, the consume-queue re-dispatch with its tag code), "
            "so recovery with a checkpoint takes about that per record written since the "
            "checkpoint: up to a checkpoint interval (1 s) plus one flush of writes.",
        ]
    return [
        f"Log of {_bytes(result['log_bytes'])} ({_n(writer['messages'])} records of "
        f"{result['record_bytes']} B, {writer['segments']} segment(s) of "
        f"{_bytes(result['segment_bytes'])}), written by a subprocess in "
        f"{writer['seconds']:.1f} s that then left with `os._exit` (no close, no final "
        "checkpoint). *open* is the whole `MessageStore(...)` constructor, *scan* the commit-log "
        "scan inside it (CRC of every body, consume-queue re-dispatch). The second row deletes "
        "`checkpoint` and `checkpoint.bak` after a clean close and rebuilds every queue from "
        "byte 0. "
        f"The checkpoint the writer left was {_checkpoint_lag(result)} behind the end of its "
        "log. The floor row walks the same log by totalSize and takes crc32 of each body "
        "and nothing else (one crc32 over all of it took "
        f"{(result.get('crc_floor') or {}).get('crc_all_bytes_seconds', float('nan')):.3f} s): "
        "the part of a full scan that is inherent. Warm page cache.",
        "",
        *markdown_table(
            [
                "variant",
                "open s",
                "scan s",
                "records scanned",
                "bytes scanned",
                "scan MB/s",
                "records/s",
                "queue entries dropped",
            ],
            rows,
        ),
        *notes,
    ]


_TARGET_ROWS = {
    "async-put": "Async append, put(), 1 thread, in-process",
    "async-put-prefaulted": "Async append, put(), segment pre-faulted (reference)",
    "async-put_batch32": "Async append, put_batch(32) (reference)",
}


def _targets(loaded: dict[str, Any]) -> list[str]:
    rows = []
    append = loaded.get("append")
    if append is not None:
        for r in append["results"]:
            label = _TARGET_ROWS.get(r["variant"])
            if label is None:
                continue
            median_ok = r["msgs_per_s"] >= TARGET_ASYNC_MSGS_PER_S
            best_ok = r["msgs_per_s_best"] >= TARGET_ASYNC_MSGS_PER_S
            verdict = "met" if median_ok else "met by the best run only" if best_ok else "missed"
            rows.append(
                [
                    label,
                    f"≥ {_n(TARGET_ASYNC_MSGS_PER_S)} msg/s",
                    f"median {_n(r['msgs_per_s'])}, best {_n(r['msgs_per_s_best'])} msg/s",
                    verdict if median_ok else f"**{verdict}**",
                ]
            )
    recovery = loaded.get("recovery")
    if recovery is not None:
        r = recovery["results"][0]
        ok = r["open_seconds"] <= TARGET_RECOVERY_S
        rows.append(
            [
                f"Recovery with checkpoint ({_bytes(recovery['log_bytes'])} log)",
                f"≤ {TARGET_RECOVERY_S:g} s",
                f"{r['open_seconds']:.3f} s (whole open; {_n(r['records_scanned'])} records "
                "after the checkpoint)",
                "met" if ok else "**missed**",
            ]
        )
    return markdown_table(["target (spec)", "required", "measured", ""], rows) if rows else []


def _earlier(run_info: dict[str, Any], scenario: str) -> list[str]:
    """A note for a section an earlier run produced (a run of some scenarios keeps the rest)."""
    section = (run_info.get("sections") or {}).get(scenario)
    if not section or section.get("started") is None:
        return []
    if section["started"] >= run_info["started"]:
        return []
    return [
        f"From an earlier run, {section['started']} to {section['finished']} (load average "
        f"{section.get('loadavg_start', '?')} at its start):",
        "",
        "```",
        section["command"],
        "```",
        "",
    ]


def render(loaded: dict[str, Any]) -> str:
    run_info = loaded["run"]
    lines = [
        "# Benchmark results",
        "",
        "Generated by `bench/run.py`; do not edit by hand except `bench/CHANGES.md`, which is "
        "copied in at the end. Re-run with `make bench`.",
        "",
    ]
    if run_info.get("quick"):
        lines += ["**Quick (smoke) sizes: these numbers mean nothing.**", ""]
    lines += [
        f"Run {run_info['started']} to {run_info['finished']}:",
        "",
        "```",
        run_info["command"],
        "```",
        "",
        "## Machine",
        "",
        *_machine(run_info),
        "",
    ]
    targets = _targets(loaded)
    if targets:
        lines += ["## Targets", "", *targets, ""]
    sections = (
        ("append", "Append throughput (in-process)", _append),
        ("read", "Read throughput", _read),
        ("recovery", "Recovery", _recovery),
        ("client", "Client throughput (loopback, real broker and name server)", render_client),
        ("rocketmq", "reconsume vs Apache RocketMQ (one Java load generator)", render_rocketmq),
    )
    for key, title, fn in sections:
        if key in loaded:
            lines += [
                f"## {title}",
                "",
                *_earlier(run_info, key),
                *fn(loaded[key]),
                "",
                f"Scenario wall time {loaded[key]['wall_seconds']:.1f} s.",
                "",
            ]
    if CHANGES.exists():
        lines += [CHANGES.read_text().rstrip(), ""]
    return "\n".join(lines)
