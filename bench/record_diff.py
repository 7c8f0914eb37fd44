"""Digest of what the store writes for a fixed random workload, to compare two libraries.

    PYTHONPATH=/tmp/baseline/broker_image python -m bench.record_diff   # the library before
    python -m bench.record_diff                                         # this one

Both must print the same digest. The workload (seeded): 3,000 messages per store host (IPv4,
then IPv6), IPv4 and IPv6 born hosts, sysFlags with the v6 bits pre-set or not, empty to
60 KiB bodies, non-ASCII properties, five topics, 1 MiB segments (so the log rolls), single
puts and batches, then three rejected messages. The store clock is replaced by a counter. The
digest covers every PutResult, the error types and the bytes of every commit-log and
consume-queue file.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from reconsume.message.address import HostAddress
from reconsume.message.properties import encode_properties
from reconsume.store import MessageStore, PutRequest, StoreSettings

_V4 = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_V6 = HostAddress(bytes(range(16)), 999).packed()


def _request(rng: random.Random, i: int) -> PutRequest:
    properties = (
        encode_properties(
            {
                "TAGS": rng.choice(["a", "b", "ü"]),
                "KEYS": f"k{i}",
                "UNIQ_KEY": "é" * rng.randrange(5),
            }
        )
        if rng.random() < 0.9
        else ""
    )
    return PutRequest(
        rng.choice(["A", "Topic_B", "%RETRY%grp", "x" * 127, "T|1"]),
        rng.randrange(5),
        rng.randbytes(rng.choice([0, 1, 10, 1024, 5000, 60000])),
        properties,
        flag=rng.randrange(-5, 100),
        sys_flag=rng.choice([0, 1, 2, 0x30, 0x10, 4, 0xFF]),
        born_timestamp_ms=rng.randrange(1 << 40),
        born_host=rng.choice([_V4, _V6]),
        reconsume_times=rng.randrange(20),
        prepared_transaction_offset=rng.randrange(1 << 50),
    )


def digest() -> str:
    clock = [1_700_000_000_000_000_000]

    def fake_time_ns() -> int:
        clock[0] += 1_234_567
        return clock[0]

    real_time_ns = time.time_ns
    time.time_ns = fake_time_ns  # the store stamps records with time.time_ns()
    try:
        rng = random.Random(42)
        out: list[Any] = []
        settings = StoreSettings(
            commit_log_segment_bytes=1 << 20,
            max_message_bytes=128 * 1024,
            consume_queue_entries_per_file=100,
        )
        hosts = (HostAddress(b"\x0a\x00\x00\x02", 10911), HostAddress(bytes(range(16, 32)), 10911))
        for store_host in hosts:
            with tempfile.TemporaryDirectory() as directory:
                store = MessageStore(directory, settings, store_host=store_host, background=False)
                i = 0
                while i < 3000:
                    if rng.random() < 0.5:
                        out.append(list(store.put(_request(rng, i))))
                        i += 1
                    else:
                        batch = [_request(rng, i + k) for k in range(rng.randrange(1, 40))]
                        out.extend(list(r) for r in store.put_batch(batch))
                        i += len(batch)
                for bad in (
                    PutRequest("bad topic", 0, b"x"),
                    PutRequest("A", 0, b"x" * 200_000),
                    PutRequest("A", 0, b"x", "K\x01" + "v" * 40000),
                ):
                    try:
                        store.put(bad)
                        out.append("accepted")
                    except Exception as exc:
                        out.append(type(exc).__name__)
                store.close()
                files = hashlib.sha256()
                for path in sorted(Path(directory).rglob("*")):
                    if path.is_file() and {"commitlog", "consumequeue"} & set(path.parts):
                        files.update(str(path.relative_to(directory)).encode())
                        files.update(path.read_bytes())
                out.append(files.hexdigest())
    finally:
        time.time_ns = real_time_ns
    return hashlib.sha256(json.dumps(out).encode()).hexdigest()


if __name__ == "__main__":
    print(digest())
