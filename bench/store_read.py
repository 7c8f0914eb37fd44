"""Read throughput: get_messages over every queue of the topic, in order, 32 records a call.

The store is filled first (Async, put_batch); the reads then run on the warm page cache, as
a consumer that keeps up with producers does. Each pass reads every message once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import QUEUES, TOPIC, Sizes, body_of, data_dir, make_requests, median
from reconsume.store.reads import GetStatus
from reconsume.store.settings import FlushMode
from reconsume.store.store import MessageStore

MAX_COUNT = 32
_FILL_CHUNK = 50_000


def _read_all(store: MessageStore) -> tuple[int, int, int, float]:
    """(messages, bytes, calls, seconds) of one pass over every queue."""
    messages = total_bytes = calls = 0
    get = store.get_messages
    started = time.perf_counter()
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            result = get(TOPIC, queue_id, offset, MAX_COUNT)
            calls += 1
            if result.status is not GetStatus.FOUND:
                break
            messages += len(result.records)
            total_bytes += result.total_bytes
            offset = result.next_begin_offset
    return messages, total_bytes, calls, time.perf_counter() - started


def run(sizes: Sizes, data_root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    body = body_of(sizes.body_bytes)
    runs: list[dict[str, Any]] = []
    with data_dir(root=data_root, name="read") as directory:
        store = MessageStore(directory, sizes.settings(flush_mode=FlushMode.ASYNC))
        try:
            for start in range(0, sizes.read_messages, _FILL_CHUNK):
                count = min(_FILL_CHUNK, sizes.read_messages - start)
                requests = make_requests(count, body, start=start)
                for i in range(0, count, 32):
                    store.put_batch(requests[i : i + 32])
            for attempt in range(sizes.repeats):
                messages, total_bytes, calls, elapsed = _read_all(store)
                if messages != sizes.read_messages:
                    raise RuntimeError(f"read {messages} of {sizes.read_messages} messages")
                runs.append(
                    {"messages": messages, "bytes": total_bytes, "calls": calls, "seconds": elapsed}
                )
                log(f"  read pass {attempt + 1}/{sizes.repeats}: {messages / elapsed:,.0f} msg/s")
        finally:
            store.close()
    seconds = median([r["seconds"] for r in runs])
    best = min(r["seconds"] for r in runs)
    first = runs[0]
    return {
        "scenario": "store_read",
        "body_bytes": sizes.body_bytes,
        "results": [
            {
                "variant": f"get_messages max_count={MAX_COUNT}",
                "queues": QUEUES,
                "messages": first["messages"],
                "bytes": first["bytes"],
                "calls": first["calls"],
                "runs_seconds": [r["seconds"] for r in runs],
                "seconds": seconds,
                "msgs_per_s": first["messages"] / seconds,
                "msgs_per_s_best": first["messages"] / best,
                "mb_per_s": first["bytes"] / seconds / 1e6,
            }
        ],
    }
