"""Recovery time of a commit log of ``recovery_bytes`` (1 GiB at full size) of 1 KiB messages.

A writer subprocess fills the log (Async flush, put_batch, background thread running as in a
broker) and leaves with ``os._exit`` straight after its last append: no close, no final
checkpoint, exactly what a crash leaves (the page cache survives, as it does when only the
process dies). The store is then reopened twice:

1. with the checkpoint the writer's background thread last wrote (it lags the end of the log
   by up to a checkpoint interval plus the fsync that precedes the checkpoint);
2. without one (``checkpoint`` and its ``.bak`` deleted after a clean close), so recovery
   rebuilds every consume queue from the first byte of the log, CRC-checking every body.

The page cache is warm in both (the data was just written); a cold cache adds read time.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, Sizes, body_of, data_dir, make_requests, stored_size
from reconsume.message.codec import MESSAGE_MAGIC_CODE, record_size
from reconsume.store.settings import FlushMode
from reconsume.store.store import MessageStore

_SIZE_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_CHUNK = 32_000  # requests built at a time by the writer
BATCH = 32


def _writer(directory: Path, sizes: Sizes) -> None:
    """Fill the log to ``recovery_bytes`` and die without closing (runs in the subprocess)."""
    record_bytes = stored_size(sizes.body_bytes)
    # Stay within one segment of a 1 GiB log with 1 GiB segments: no blank, no roll.
    target = sizes.recovery_bytes - 8
    count = max(1, target // record_bytes)
    body = body_of(sizes.body_bytes)
    store = MessageStore(directory, sizes.settings(flush_mode=FlushMode.ASYNC))
    started = time.perf_counter()
    written = 0
    while written < count:
        requests = make_requests(min(_CHUNK, count - written), body, start=written)
        for i in range(0, len(requests), BATCH):
            store.put_batch(requests[i : i + BATCH])
        written += len(requests)
    elapsed = time.perf_counter() - started
    report = {
        "messages": written,
        "write_offset": store.commitlog.write_offset,
        "segments": len(store.commitlog.segments),
        "seconds": elapsed,
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    os._exit(0)  # a crash: no close(), no final checkpoint


def _reopen(directory: Path, sizes: Sizes) -> dict[str, Any]:
    started = time.perf_counter()
    store = MessageStore(directory, sizes.settings(), background=False)
    opened = time.perf_counter() - started
    try:
        report = store.recovery
        queue_entries = sum(q.max_offset - q.min_offset for q in store.queues)
        return {
            "open_seconds": opened,
            "scan_seconds": report.seconds,
            "checkpoint_offset": report.checkpoint_offset,
            "scan_start": report.scan_start,
            "end_offset": report.end_offset,
            "records_scanned": report.records_scanned,
            "bytes_scanned": report.bytes_scanned,
            "entries_dropped": report.entries_dropped,
            "truncated_at": report.truncated_at,
            "anomalies": len(report.anomalies),
            "queue_entries": queue_entries,
        }
    finally:
        started = time.perf_counter()
        store.close()
        closed = time.perf_counter() - started
        if closed > 5:
            print(f"  (close took {closed:.1f}s)")


def _crc_floor(directory: Path) -> dict[str, Any]:
    """What checking every body's CRC costs alone: walking the log by totalSize and taking
    crc32 of each body (the per-record floor of a full scan), and one crc32 of every byte."""
    head_size = record_size(0, 0, 0) - 3  # through bodyLength, IPv4 hosts
    walk = whole = 0.0
    records = 0
    for path in sorted((directory / "commitlog").iterdir()):
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as mm:
            view = memoryview(mm)
            try:
                started = time.perf_counter()
                pos = 0
                limit = len(mm) - 8
                while pos <= limit:
                    total, magic = _SIZE_MAGIC.unpack_from(mm, pos)
                    if total <= 0 or magic != MESSAGE_MAGIC_CODE:
                        break
                    body_len = _I32.unpack_from(mm, pos + head_size - 4)[0]
                    body_at = pos + head_size
                    zlib.crc32(view[body_at : body_at + body_len])
                    records += 1
                    pos += total
                walk += time.perf_counter() - started
                started = time.perf_counter()
                zlib.crc32(view[:pos])
                whole += time.perf_counter() - started
            finally:
                view.release()
    return {"records": records, "walk_crc_seconds": walk, "crc_all_bytes_seconds": whole}


def run(sizes: Sizes, data_root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    with data_dir(data_root, "recovery") as directory:
        command = [
            sys.executable,
            "-m",
            "bench.store_recovery",
            "--writer",
            str(directory),
            "--sizes",
            json.dumps(sizes.as_dict()),
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(BENCH_DIR.parent), env.get("PYTHONPATH", "")) if p
        )
        log(f"  writing {sizes.recovery_bytes / 2**20:,.0f} MiB in a subprocess")
        done = subprocess.run(
            command, cwd=BENCH_DIR.parent, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"writer failed ({done.returncode}): {done.stderr[-2000:]}")
        writer = json.loads(done.stdout.strip().splitlines()[-1])
        log(
            f"  writer: {writer['messages']:,} messages, {writer['write_offset']:,} bytes in "
            f"{writer['seconds']:.1f}s; exited without close()"
        )
        with_checkpoint = _reopen(directory, sizes)
        log(
            f"  reopen with checkpoint: {with_checkpoint['open_seconds']:.3f}s, "
            f"{with_checkpoint['records_scanned']:,} records scanned"
        )
        for name in ("checkpoint", "checkpoint.bak"):
            (directory / name).unlink(missing_ok=True)
        without_checkpoint = _reopen(directory, sizes)
        log(
            f"  reopen without checkpoint: {without_checkpoint['open_seconds']:.3f}s, "
            f"{without_checkpoint['records_scanned']:,} records scanned"
        )
        crc_floor = _crc_floor(directory)
        log(
            f"  CRC alone: {crc_floor['walk_crc_seconds']:.3f}s walking every record, "
            f"{crc_floor['crc_all_bytes_seconds']:.3f}s for one crc32 over the log"
        )
    for row in (with_checkpoint, without_checkpoint):
        if row["end_offset"] != writer["write_offset"]:
            raise RuntimeError(
                f"recovery ended at {row['end_offset']}, the writer at {writer['write_offset']}"
            )
        if row["queue_entries"] != writer["messages"]:
            raise RuntimeError(
                f"{row['queue_entries']} queue entries after recovery, {writer['messages']} written"
            )
    return {
        "scenario": "store_recovery",
        "body_bytes": sizes.body_bytes,
        "record_bytes": stored_size(sizes.body_bytes),
        "log_bytes": writer["write_offset"],
        "segment_bytes": sizes.segment_bytes,
        "writer": writer,
        "crc_floor": crc_floor,
        "results": [
            {"variant": "with checkpoint (unclean stop)", **with_checkpoint},
            {"variant": "without checkpoint (full scan)", **without_checkpoint},
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="recovery benchmark writer (internal)")
    parser.add_argument("--writer", type=Path, required=True)
    parser.add_argument("--sizes", required=True, help="Sizes as JSON")
    args = parser.parse_args()
    _writer(args.writer, Sizes(**json.loads(args.sizes)))


if __name__ == "__main__":
    main()
