"""Delay levels and timer under repeated SIGKILLs: 2,000 delayed messages (half on delay
levels, half on the timer, due over half a minute) while the broker is killed 8 times under
Sync flush with the default 5 s progress interval. Each restart resumes from progress up to
5 s old; the deliveries found in the log are skipped, so every message reaches its topic
exactly once."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest

from reconsume.message import properties as props

from .retry_support import Samples, metric, read_queue, retry_cluster, scrape
from .wire_client import BrokerClient, eventually, ok

BROKER = "broker-a"
LEVELS = range(1, 11)
DELAYS = " ".join(f"{3 * level}s" for level in LEVELS)
PER_LEVEL = 100
TIMERS = 1_000
KILLS = 8
TOPIC = "delayed"


def pending(samples: Samples) -> float:
    levels = sum(metric(samples, "reconsume_schedule_pending", level=str(n)) for n in LEVELS)
    return levels + metric(samples, "reconsume_timer_pending")


def delivered(samples: Samples) -> float:
    levels = sum(
        metric(samples, "reconsume_schedule_delivered_total", level=str(n)) for n in LEVELS
    )
    return levels + metric(samples, "reconsume_timer_delivered_total")


def engine_running(samples: Samples) -> bool:
    return any(name == "reconsume_timer_pending" for name, _labels in samples)


async def send_all(client: BrokerClient, addr: str, rnd: random.Random) -> set[str]:
    sends = [
        (f"L{level}-{i}", {props.DELAY_TIME_LEVEL: str(level)})
        for level in LEVELS
        for i in range(PER_LEVEL)
    ]
    sends += [  # due between 3 and 30 s, in no particular order
        (f"T{i}", {props.TIMER_DELAY_MS: str(rnd.randint(3_000, 30_000))}) for i in range(TIMERS)
    ]
    rnd.shuffle(sends)
    for start in range(0, len(sends), 100):  # 100 at a time: group commits under Sync flush
        chunk = sends[start : start + 100]
        for response in await asyncio.gather(
            *(
                client.send(addr, TOPIC, key.encode(), properties={**extra, "UNIQ_KEY": key})
                for key, extra in chunk
            )
        ):
            ok(response)
    return {key for key, _extra in sends}


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_eight_kills_under_sync_flush_deliver_every_delayed_message_once(tmp_path: Path) -> None:
    rnd = random.Random(2000)
    flags = ["--flush", "Sync", "--offset-persist-interval-ms", "5000"]
    skipped = duplicates_counted = 0.0
    with retry_cluster(tmp_path, (BROKER,), delay_levels=DELAYS, extra=flags) as cluster:

        async def start() -> set[str]:
            async with BrokerClient() as client:
                addr = cluster.brokers[BROKER].address
                ok(await client.create_topic(addr, TOPIC, 1))
                return await send_all(client, addr, rnd)

        keys = asyncio.run(start())

        async def deliver_then_scrape(count: int) -> Samples:
            """Once the engine runs, wait until it has delivered or skipped ``count`` messages
            (or has nothing left), then scrape: the kill falls amid deliveries."""
            broker = cluster.brokers[BROKER]

            async def progressed() -> Samples | None:
                samples = await scrape(broker)
                if not engine_running(samples):
                    return None
                done = delivered(samples) + metric(
                    samples, "reconsume_schedule_skipped_redeliveries_total"
                )
                return samples if done >= count or not pending(samples) else None

            found: Samples = await eventually(progressed, 60, what=f"{count} deliveries")
            return found

        for _ in range(KILLS):
            samples = asyncio.run(deliver_then_scrape(rnd.randint(100, 250)))
            skipped += metric(samples, "reconsume_schedule_skipped_redeliveries_total")
            duplicates_counted += metric(samples, "reconsume_schedule_redelivered_duplicates_total")
            cluster.restart(BROKER)

        async def finish() -> tuple[Counter[str], Samples]:
            broker = cluster.brokers[BROKER]
            async with BrokerClient() as client:

                async def all_delivered() -> Counter[str] | None:
                    samples = await scrape(broker)
                    if not engine_running(samples) or pending(samples):
                        return None
                    found = Counter(m.uniq_key or "" for m in await read_queue(
                        client, broker.address, TOPIC))  # fmt: skip
                    return found if set(found) >= keys else None

                found: Counter[str] = await eventually(all_delivered, 120, what="every message")
                return found, await scrape(broker)

        found, samples = asyncio.run(finish())
    skipped += metric(samples, "reconsume_schedule_skipped_redeliveries_total")
    duplicates_counted += metric(samples, "reconsume_schedule_redelivered_duplicates_total")
    duplicates = sum(count - 1 for count in found.values())
    print(
        f"\n{len(keys)} messages, {KILLS} kills: {duplicates} delivered twice "
        f"({duplicates_counted:.0f} counted), {skipped:.0f} skipped as already delivered"
    )
    assert set(found) == keys  # none lost
    assert duplicates == 0
    assert duplicates_counted == 0
    assert metric(samples, "reconsume_schedule_discarded_total") == 0
    assert skipped > 0  # the kills fell while deliveries were made: progress was re-run
