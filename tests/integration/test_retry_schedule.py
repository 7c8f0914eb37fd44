"""The schedule service's durability on a real broker process: a SIGKILL with messages waiting
in every delay level (each delivered exactly once: what was delivered before the kill is
found in the log and skipped), and a store that refuses writes (a full disk, simulated by
lowering the broker's RLIMIT_FSIZE so the next commit-log segment cannot be created)."""

from __future__ import annotations

import asyncio
import resource
import time
from collections import Counter
from pathlib import Path

import pytest

from reconsume.message import properties as props
from reconsume.wire.codes import ResponseCode

from .retry_support import Samples, metric, read_queue, retry_cluster, scrape
from .wire_client import BrokerClient, eventually, ok

BROKER = "broker-a"


@pytest.mark.crash
@pytest.mark.parametrize(
    ("flush", "persist_interval_ms"),
    [
        ("Sync", 60_000),  # nothing persisted after start: every earlier delivery is re-run
        ("Async", 200),  # some persisted, some not
    ],
)
def test_a_killed_broker_delivers_every_delayed_message_exactly_once(
    tmp_path: Path, flush: str, persist_interval_ms: int
) -> None:
    delays = "300ms 500ms 700ms 900ms 1100ms 1300ms"
    levels = range(1, 7)
    per_level = 5
    flags = ["--flush", flush, "--offset-persist-interval-ms", str(persist_interval_ms)]

    with retry_cluster(tmp_path, (BROKER,), delay_levels=delays, extra=flags) as cluster:

        async def before_kill() -> int:
            async with BrokerClient() as client:
                addr = cluster.brokers[BROKER].address
                ok(await client.create_topic(addr, "delayed", 1))
                for level in levels:
                    for i in range(per_level):
                        ok(await client.send(addr, "delayed", f"{level}/{i}".encode(),
                                             properties={props.DELAY_TIME_LEVEL: str(level),
                                                         "UNIQ_KEY": f"L{level}-{i}"}))  # fmt: skip

                async def two_levels_delivered() -> int:
                    copies = await read_queue(client, addr, "delayed")
                    return len(copies) if len(copies) >= 2 * per_level else 0

                delivered: int = await eventually(two_levels_delivered, what="levels 1 and 2")
                return delivered

        delivered_before = asyncio.run(before_kill())
        restarted = cluster.restart(BROKER)

        async def after_restart() -> tuple[Counter[str], Samples]:
            async with BrokerClient() as client:

                async def all_delivered() -> Counter[str] | None:
                    copies = await read_queue(client, restarted.address, "delayed")
                    samples = await scrape(restarted)
                    pending = sum(
                        metric(samples, "reconsume_schedule_pending", level=str(level))
                        for level in levels
                    )
                    keys = Counter(m.uniq_key or "" for m in copies)
                    return keys if len(keys) == len(levels) * per_level and not pending else None

                keys: Counter[str] = await eventually(all_delivered, 30, what="every message")
                return keys, await scrape(restarted)

        keys, samples = asyncio.run(after_restart())

    assert set(keys) == {f"L{level}-{i}" for level in levels for i in range(per_level)}
    assert set(keys.values()) == {1}  # none lost, none twice
    assert metric(samples, "reconsume_schedule_redelivered_duplicates_total") == 0
    skipped = metric(samples, "reconsume_schedule_skipped_redeliveries_total")
    if persist_interval_ms > 10_000:
        assert skipped >= delivered_before > 0  # every earlier delivery re-run, and skipped


def test_a_store_refusing_writes_delays_deliveries_but_skips_none(tmp_path: Path) -> None:
    config = """
[store]
commit_log_segment_bytes = 262144
max_message_bytes = 65536
consume_queue_entries_per_file = 1024
"""
    delay_s = 2.0
    count = 10
    # Async flush: the segment fills in a few milliseconds, not one fsync per send (which on a
    # busy disk can outlast the delay); the refusal comes from a segment that cannot be created.
    with retry_cluster(
        tmp_path, (BROKER,), delay_levels="2s", config=config, extra=("--flush", "Async")
    ) as cluster:
        broker = cluster.brokers[BROKER]
        pid = broker.process.pid
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)

        async def scenario() -> tuple[list[str], float]:
            async with BrokerClient() as client:
                addr = broker.address
                for topic in ("plain", "target"):
                    ok(await client.create_topic(addr, topic, 1))
                    ok(await client.send(addr, topic, b"warm-up"))  # its queue file exists
                started = time.monotonic()
                for i in range(count):
                    ok(await client.send(addr, "target", f"d{i}".encode(),
                                         properties={props.DELAY_TIME_LEVEL: "1",
                                                     "UNIQ_KEY": f"d{i}"}))  # fmt: skip
                # Below the segment size: the next segment cannot be created. Fill the current
                # one until even a tiny message no longer fits.
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (128 * 1024, limits[1]))
                for size in (32 * 1024, 4096, 512, 64, 1):
                    for _ in range(200):
                        response = await client.send(addr, "plain", b"f" * size)
                        if response.code != ResponseCode.SUCCESS:
                            assert response.code == ResponseCode.SYSTEM_ERROR, response.remark
                            break
                    else:
                        raise AssertionError(f"{size}-byte sends never failed")
                assert time.monotonic() - started < delay_s, "filling took longer than the delay"

                async def refused() -> bool:
                    samples = await scrape(broker)
                    return metric(samples, "reconsume_schedule_put_failures_total") >= 3

                await eventually(refused, what="deliveries refused by the store")
                samples = await scrape(broker)
                assert metric(samples, "reconsume_schedule_pending", level="1") == count
                assert [m.body for m in await read_queue(client, addr, "target")] == [b"warm-up"]

                resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)

                async def delivered() -> list[str] | None:
                    found = await read_queue(client, addr, "target")
                    return [m.uniq_key or "" for m in found[1:]] if len(found) > count else None

                keys: list[str] = await eventually(
                    delivered, what="deliveries after the disk freed"
                )
                samples = await scrape(broker)
                assert metric(samples, "reconsume_schedule_pending", level="1") == 0
                assert metric(samples, "reconsume_schedule_discarded_total") == 0
                return keys, metric(samples, "reconsume_schedule_delivered_total", level="1")

        keys, delivered_total = asyncio.run(scenario())
    assert keys == [f"d{i}" for i in range(count)]  # all of them, in order, once
    assert delivered_total == count
