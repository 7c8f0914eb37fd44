"""Append throughput in-process: 1 KiB messages, Async (put, put_batch) and Sync (1, 8 threads).

Requests are built before the clock starts (the store's cost, not the caller's, is measured).
Each Async run uses a fresh store directory; the store's background thread runs as in a broker
(Async: fsync every flush_interval_ms, checkpoint every checkpoint_interval_ms).

The first write to a page of a new segment costs whatever the machine charges for a fresh
page-cache page; on a VM whose memory the host backs lazily (or takes back when freed) that is
several µs per 4 KiB. So the Async variants also run on a *pre-faulted* segment (its pages
faulted in with ``madvise(MADV_POPULATE_WRITE)`` before the clock starts) to show the store's
own cost, and ``floor-memcpy`` copies the same bytes into a fresh mapped segment with nothing
else, the price of the pages alone.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Sizes, body_of, data_dir, make_requests, median, stored_size
from reconsume.store import MessageStore, PutRequest
from reconsume.store.settings import FlushMode

BATCH = 32
SYNC_THREADS = 8
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)

ASYNC_VARIANTS = (
    "async-put",
    "async-put_batch32",
    "async-put-prefaulted",
    "async-put_batch32-prefaulted",
    "floor-memcpy",
)
SYNC_VARIANTS = ("sync-put-1-thread", f"sync-put-{SYNC_THREADS}-threads")


def _count_fsync_rounds(store: MessageStore) -> list[int]:
    """Count group-commit advances (each follows one fsync round of the commit log)."""
    counter = [0]
    group_commit = store.group_commit
    original = group_commit.advance

    def advance(offset: int) -> None:
        counter[0] += 1
        original(offset)

    group_commit.advance = advance  # type: ignore[method-assign]
    return counter


def _prefault(mm: mmap.mmap, length: int) -> None:
    """Fault in the first ``length`` bytes of a mapping writable, leaving its content as is."""
    length = min(length, len(mm))
    try:
        mm.madvise(_MADV_POPULATE_WRITE, 0, length)
    except (OSError, AttributeError):
        for offset in range(0, length, mmap.PAGESIZE):
            mm[offset] = mm[offset]  # a write fault per page; the byte is unchanged


def _async_run(
    root: Path, sizes: Sizes, requests: list[PutRequest], variant: str, record_bytes: int
) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the calling thread) of one run on a fresh store."""
    if variant == "floor-memcpy":
        return _floor_run(root, sizes, len(requests), record_bytes)
    with data_dir(root, "append") as directory:
        store = MessageStore(directory, sizes.settings(flush_mode=FlushMode.ASYNC))
        try:
            if variant.endswith("-prefaulted"):
                _prefault(store.commitlog.active.mm, len(requests) * record_bytes + (1 << 20))
            if "batch" in variant:
                put_batch = store.put_batch
                chunks = [requests[i : i + BATCH] for i in range(0, len(requests), BATCH)]
                cpu = time.thread_time()
                started = time.perf_counter()
                for chunk in chunks:
                    put_batch(chunk)
                elapsed = time.perf_counter() - started
                cpu = time.thread_time() - cpu
            else:
                put = store.put
                cpu = time.thread_time()
                started = time.perf_counter()
                for request in requests:
                    put(request)
                elapsed = time.perf_counter() - started
                cpu = time.thread_time() - cpu
            if store.commitlog.write_offset <= 0:
                raise RuntimeError("nothing was appended")
        finally:
            store.close()
    return elapsed, cpu


def _floor_run(root: Path, sizes: Sizes, count: int, record_bytes: int) -> tuple[float, float]:
    """Copy ``count`` records' bytes into a fresh fallocated mapping, one slice per record."""
    record = os.urandom(record_bytes)
    size = sizes.settings().commit_log_segment_bytes
    with data_dir(root, "floor") as directory:
        fd = os.open(directory / "segment", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
            with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mm:
                pos = 0
                limit = size - record_bytes
                cpu = time.thread_time()
                started = time.perf_counter()
                for _ in range(count):
                    end = pos + record_bytes
                    mm[pos:end] = record
                    pos = end if end < limit else 0
                elapsed = time.perf_counter() - started
                cpu = time.thread_time() - cpu
        finally:
            os.close(fd)
    return elapsed, cpu


def _sync_run(root: Path, sizes: Sizes, body: bytes, threads: int) -> dict[str, Any]:
    per_thread = sizes.sync_messages
    batches = [make_requests(per_thread, body, start=t * per_thread) for t in range(threads)]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    with data_dir(root, "append-sync") as directory:
        store = MessageStore(directory, sizes.settings(flush_mode=FlushMode.SYNC))
        try:
            rounds = _count_fsync_rounds(store)
            barrier = threading.Barrier(threads + 1)
            errors: list[BaseException] = []

            def worker(n: int) -> None:
                put = store.put
                clock = time.perf_counter
                mine = latencies[n]
                barrier.wait()
                try:
                    for request in batches[n]:
                        began = clock()
                        put(request, 30.0)
                        mine.append(clock() - began)
                except BaseException as exc:
                    errors.append(exc)

            workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
            for thread in workers:
                thread.start()
            rounds_before = rounds[0]
            barrier.wait()
            started = time.perf_counter()
            for thread in workers:
                thread.join()
            elapsed = time.perf_counter() - started
            fsync_rounds = rounds[0] - rounds_before
            if errors:
                raise errors[0]
        finally:
            store.close()
    flat = sorted(x for per in latencies for x in per)
    messages = threads * per_thread
    return {
        "threads": threads,
        "messages": messages,
        "seconds": elapsed,
        "msgs_per_s": messages / elapsed,
        "fsync_rounds": fsync_rounds,
        "fsyncs_per_put": fsync_rounds / messages,
        "latency_p50_ms": flat[len(flat) // 2] * 1000,
        "latency_p99_ms": flat[min(len(flat) - 1, int(len(flat) * 0.99))] * 1000,
    }


def run(
    sizes: Sizes,
    data_root: Path,
    variants: tuple[str, ...] = ASYNC_VARIANTS + SYNC_VARIANTS,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    body = body_of(sizes.body_bytes)
    requests = make_requests(sizes.append_messages, body)
    record_bytes = stored_size(sizes.body_bytes)
    results: list[dict[str, Any]] = []
    for variant in variants:
        if variant in ASYNC_VARIANTS:
            times: list[float] = []
            cpus: list[float] = []
            for attempt in range(sizes.repeats):
                elapsed, cpu = _async_run(data_root, sizes, requests, variant, record_bytes)
                times.append(elapsed)
                cpus.append(cpu)
                log(
                    f"  {variant} run {attempt + 1}/{sizes.repeats}: "
                    f"{len(requests) / elapsed:,.0f} msg/s, "
                    f"{cpu / len(requests) * 1e6:.2f} us CPU/msg"
                )
            best, mid = min(times), median(times)
            n = len(requests)
            results.append(
                {
                    "variant": variant,
                    "flush_mode": "Async" if variant != "floor-memcpy" else "-",
                    "threads": 1,
                    "batch": BATCH if "batch" in variant else 1,
                    "messages": n,
                    "runs_seconds": times,
                    "runs_cpu_seconds": cpus,
                    "cpu_us_per_msg": median(cpus) / n * 1e6,
                    "seconds": mid,
                    "msgs_per_s": n / mid,
                    "msgs_per_s_best": n / best,
                    "mb_per_s": n * record_bytes / mid / 1e6,
                }
            )
        elif variant in SYNC_VARIANTS:
            threads = 1 if variant == SYNC_VARIANTS[0] else SYNC_THREADS
            row = _sync_run(data_root, sizes, body, threads)
            row.update(
                variant=variant,
                flush_mode="Sync",
                batch=1,
                mb_per_s=row["msgs_per_s"] * record_bytes / 1e6,
            )
            log(
                f"  {variant}: {row['msgs_per_s']:,.0f} msg/s, "
                f"{row['fsyncs_per_put']:.3f} fsync rounds/put"
            )
            results.append(row)
        else:
            raise ValueError(f"unknown append variant {variant!r}")
    return {
        "scenario": "store_append",
        "body_bytes": sizes.body_bytes,
        "record_bytes": record_bytes,
        "results": results,
    }
