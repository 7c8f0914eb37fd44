"""The writer process of the crash tests (run as a script; the test kills it with SIGKILL).

Usage: ``python _crash_writer.py ROOT RUN THREADS LIMIT``. Opens the store in ROOT under Sync
flush with small segments, prints ``READY <write offset>``, then appends from THREADS threads
(random sizes, topics and queues; thread 0 uses put_batch) and prints one line per put *after*
put() returned::

    ACK <topic> <queue id> <queue offset> <commit-log offset> <size> <seed>

Body and properties are a function of the seed (:func:`message`), so the test can check every
acknowledged put byte for byte. With LIMIT > 0 each thread stops after LIMIT puts, the store is
closed cleanly and ``DONE`` is printed; with LIMIT 0 it runs until killed (at most a minute).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import traceback

from reconsume.message import properties as props
from reconsume.store import FlushMode, MessageStore, PutRequest, StoreSettings

TOPICS = ("CrashA", "CrashB", "%RETRY%crash-group")
QUEUES = 4
SEGMENT_BYTES = 16 * 1024


def settings(flush_mode: FlushMode = FlushMode.SYNC) -> StoreSettings:
    return StoreSettings(
        commit_log_segment_bytes=SEGMENT_BYTES,
        max_message_bytes=4096,
        consume_queue_entries_per_file=32,
        flush_mode=flush_mode,
        flush_interval_ms=20,
        checkpoint_interval_ms=40,
        table_flush_interval_ms=3_600_000,
        retention_check_interval_ms=3_600_000,
    )


def message(seed: str) -> tuple[bytes, str]:
    """(body, encoded properties) of the put named ``seed``."""
    rng = random.Random(seed)
    size = rng.choice((0, rng.randrange(1, 100), rng.randrange(100, 3_500)))
    properties = {props.KEYS: seed, props.TAGS: f"tag{size % 3}"}
    if rng.random() < 0.3:
        properties["EXTRA"] = "x" * rng.randrange(200)
    return rng.randbytes(size), props.encode_properties(properties)


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # one write: lines from threads never interleave


def _writer(store: MessageStore, run: str, thread: int, limit: int, stop_at: float) -> None:
    try:
        _write(store, run, thread, limit, stop_at)
    except BaseException:
        traceback.print_exc()
        os._exit(3)  # the test sees an exit that is not its SIGKILL


def _write(store: MessageStore, run: str, thread: int, limit: int, stop_at: float) -> None:
    rng = random.Random(f"{run}/{thread}")
    count = 0
    while (limit == 0 or count < limit) and time.monotonic() < stop_at:
        batch = []
        size = rng.randrange(1, 5) if thread == 0 else 1
        for _ in range(size if limit == 0 else min(size, limit - count)):
            seed = f"{run}/{thread}/{count}"
            body, properties = message(seed)
            request = PutRequest(rng.choice(TOPICS), rng.randrange(QUEUES), body, properties)
            batch.append((request, seed))
            count += 1
        if len(batch) == 1:
            results = [store.put(batch[0][0], timeout_s=30)]
        else:
            results = store.put_batch([request for request, _seed in batch], timeout_s=30)
        for (request, seed), result in zip(batch, results, strict=True):
            _say(
                f"ACK {request.topic} {request.queue_id} {result.queue_offset} "
                f"{result.commit_log_offset} {result.size} {seed}"
            )


def main(argv: list[str]) -> int:
    root, run, threads, limit = argv[1], argv[2], int(argv[3]), int(argv[4])
    store = MessageStore(root, settings())
    _say(f"READY {store.commitlog.write_offset}")
    stop_at = time.monotonic() + 60
    pool = [
        threading.Thread(target=_writer, args=(store, run, n, limit, stop_at), daemon=True)
        for n in range(threads)
    ]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    store.close()
    _say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
