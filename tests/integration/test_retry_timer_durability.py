"""The timer wheel's durability on a real broker process, next to the delay levels': a SIGKILL
with messages waiting in every delay level and on the timer (due out of send order), each
delivered exactly once afterwards, and a store that refuses writes (RLIMIT_FSIZE below the
segment size, as test_retry_schedule does)."""

from __future__ import annotations

import asyncio
import random
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


def pending(samples: Samples, levels: range) -> float:
    scheduled = sum(
        metric(samples, "reconsume_schedule_pending", level=str(level)) for level in levels
    )
    return scheduled + metric(samples, "reconsume_timer_pending")


@pytest.mark.crash
@pytest.mark.parametrize(
    ("flush", "persist_interval_ms"),
    [
        ("Sync", 60_000),  # nothing persisted after start: every earlier delivery is re-run
        ("Async", 200),  # some persisted, some not
    ],
)
def test_a_killed_broker_delivers_every_level_and_timer_message_exactly_once(
    tmp_path: Path, flush: str, persist_interval_ms: int
) -> None:
    delays = "300ms 500ms 700ms 900ms 1100ms 1300ms"
    levels = range(1, 7)
    per_level = 4
    timers = 30
    flags = ["--flush", flush, "--offset-persist-interval-ms", str(persist_interval_ms)]
    rnd = random.Random(11)
    keys = {f"L{level}-{i}" for level in levels for i in range(per_level)}
    keys |= {f"T{i}" for i in range(timers)}

    with retry_cluster(tmp_path, (BROKER,), delay_levels=delays, extra=flags) as cluster:

        async def before_kill() -> int:
            async with BrokerClient() as client:
                addr = cluster.brokers[BROKER].address
                ok(await client.create_topic(addr, "delayed", 1))
                for i in range(timers):  # due between 0.3 and 1.5 s, in no particular order
                    delay_ms = str(rnd.randint(300, 1500))
                    ok(await client.send(addr, "delayed", f"t{i}".encode(),
                                         properties={props.TIMER_DELAY_MS: delay_ms,
                                                     "UNIQ_KEY": f"T{i}"}))  # fmt: skip
                for level in levels:
                    for i in range(per_level):
                        ok(await client.send(addr, "delayed", f"{level}/{i}".encode(),
                                             properties={props.DELAY_TIME_LEVEL: str(level),
                                                         "UNIQ_KEY": f"L{level}-{i}"}))  # fmt: skip

                async def some_of_both_delivered() -> int:
                    copies = await read_queue(client, addr, "delayed")
                    found = Counter(m.uniq_key[0] for m in copies if m.uniq_key)
                    return len(copies) if found["T"] >= 10 and found["L"] >= per_level else 0

                delivered: int = await eventually(some_of_both_delivered, what="first deliveries")
                return delivered

        delivered_before = asyncio.run(before_kill())
        restarted = cluster.restart(BROKER)

        async def after_restart() -> tuple[Counter[str], Samples]:
            async with BrokerClient() as client:

                async def all_delivered() -> Counter[str] | None:
                    copies = await read_queue(client, restarted.address, "delayed")
                    samples = await scrape(restarted)
                    found = Counter(m.uniq_key or "" for m in copies)
                    return found if set(found) == keys and not pending(samples, levels) else None

                found: Counter[str] = await eventually(all_delivered, 30, what="every message")
                return found, await scrape(restarted)

        found, samples = asyncio.run(after_restart())

    assert set(found.values()) == {1}  # none lost (all keys found), none twice
    assert metric(samples, "reconsume_schedule_redelivered_duplicates_total") == 0
    assert metric(samples, "reconsume_schedule_discarded_total") == 0
    skipped = metric(samples, "reconsume_schedule_skipped_redeliveries_total")
    if persist_interval_ms > 10_000:
        # Every delivery seen before the kill (ten timer ones at least) was re-run and skipped;
        # the timer delivered only the rest.
        assert skipped >= delivered_before > 0
        assert metric(samples, "reconsume_timer_delivered_total") <= timers - 10


def test_a_store_refusing_writes_delays_timer_deliveries_but_skips_none(tmp_path: Path) -> None:
    config = """
[store]
commit_log_segment_bytes = 262144
max_message_bytes = 65536
consume_queue_entries_per_file = 1024
"""
    delay_ms = 2000
    count = 10
    # Async flush: the segment fills in a few milliseconds, not one fsync per send (which on a
    # busy disk can outlast the delay); the refusal comes from a segment that cannot be created.
    with retry_cluster(tmp_path, (BROKER,), config=config, extra=("--flush", "Async")) as cluster:
        broker = cluster.brokers[BROKER]
        pid = broker.process.pid
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)

        async def scenario() -> tuple[list[str], Samples]:
            async with BrokerClient() as client:
                addr = broker.address
                for topic in ("plain", "target"):
                    ok(await client.create_topic(addr, topic, 1))
                    ok(await client.send(addr, topic, b"warm-up"))  # its queue file exists
                started = time.monotonic()
                for i in range(count):
                    ok(await client.send(addr, "target", f"d{i}".encode(),
                                         properties={props.TIMER_DELAY_MS: str(delay_ms),
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
                assert time.monotonic() - started < delay_ms / 1000, "filling outlasted the delay"

                async def refused() -> bool:
                    samples = await scrape(broker)
                    return metric(samples, "reconsume_schedule_put_failures_total") >= 3

                await eventually(refused, what="deliveries refused by the store")
                samples = await scrape(broker)
                assert metric(samples, "reconsume_timer_pending") == count
                assert [m.body for m in await read_queue(client, addr, "target")] == [b"warm-up"]

                resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)

                async def delivered() -> list[str] | None:
                    found = await read_queue(client, addr, "target")
                    return [m.uniq_key or "" for m in found[1:]] if len(found) > count else None

                keys: list[str] = await eventually(
                    delivered, what="deliveries after the disk freed"
                )
                return keys, await scrape(broker)

        keys, samples = asyncio.run(scenario())
    assert keys == [f"d{i}" for i in range(count)]  # all of them, in due order, once
    assert metric(samples, "reconsume_timer_pending") == 0
    assert metric(samples, "reconsume_timer_delivered_total") == count
    assert metric(samples, "reconsume_schedule_discarded_total") == 0
