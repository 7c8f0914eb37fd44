"""Delay lateness and retry-path throughput of the retry and schedule engine.

    python -m bench.delay_lateness --write-json bench/out/delay_lateness.json

Real ``reconsume namesrv`` and ``reconsume broker`` processes on 127.0.0.1 (Async flush, 64 MiB
segments, millisecond delay levels ``BENCH_LEVELS``); the clients run in this process.

* lateness: ``messages`` delayed messages (default 100,000) sent at ``rate`` msg/s, half with
  a random delay level (1 to 10: the schedule service), half with a random TIMER_DELAY_MS of
  50 ms to 5 s (the timer wheel), consumed by one push consumer. Once all have arrived the
  broker is stopped and its store read: for each delivered copy, its due time (the schedule
  record's store time + its level's delay, or the timer record's TIMER_OUT_MS) against the
  copy's store time is the *broker* lateness (what ``*_lateness_seconds`` measure, whole
  milliseconds); against the time the listener saw it, the *end-to-end* lateness.
* retry path: ``retry_messages`` pre-filled messages consumed by a listener that fails each
  message once and succeeds on its redelivery; throughput = messages / time from the
  consumer's start until every message succeeded. Once with the delay levels (the broker's
  choice, level 3 = 100 ms) and once with a Customized group policy of 100 ms (timer wheel).

Results (JSON): p50 / p99 / max lateness in ms per path and overall, and msg/s per retry case.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_OUT, machine_info, write_json
from bench.servers import SEGMENT_BYTES, create_topic, servers
from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeFrom, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.engine.delays import DelayLevels
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.decode import decode_record
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import TIMER_TOPIC
from reconsume.store import MessageStore, StoreSettings

BENCH_LEVELS = "20ms 50ms 100ms 200ms 500ms 1s 2s 3s 4s 5s"
LEVELS = DelayLevels.parse(BENCH_LEVELS)
TIMER_RANGE_MS = (50, 5_000)
QUEUES = 8
SEND_TICK_S = 0.005
"""The producer sends ``rate * SEND_TICK_S`` messages at a time (10 at 2,000 msg/s)."""
CUSTOMIZED_100MS = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [100]}}
"""The timer-wheel retry case: every retry waits 100 ms, as level 3 does."""


async def until(probe: Callable[[], Any], timeout_s: float, what: str) -> None:
    """Poll ``probe`` (a function or coroutine function) until truthy, or fail after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s:g}s")
        await asyncio.sleep(0.02)


def wall_ms() -> float:
    return time.time_ns() / 1e6


# ---------------------------------------------------------------------- lateness
async def send_delayed(namesrv: str, topic: str, count: int, rate: float, seed: int) -> None:
    """``count`` delayed messages at ``rate`` msg/s: even ones at a level, odd on the timer.
    Sent in small concurrent chunks every ``SEND_TICK_S``, so the load is steady rather than
    bursty (a burst of sends ahead of a due time makes that delivery wait behind them)."""
    rnd = random.Random(seed)
    started = time.monotonic()
    chunk = max(1, round(rate * SEND_TICK_S))
    async with Producer([namesrv]) as producer:
        for first in range(0, count, chunk):
            messages = []
            for i in range(first, min(first + chunk, count)):
                if i % 2 == 0:
                    delay = {props.DELAY_TIME_LEVEL: str(rnd.randint(1, LEVELS.max_level))}
                else:
                    delay = {props.TIMER_DELAY_MS: str(rnd.randint(*TIMER_RANGE_MS))}
                messages.append(Message(topic, b"d" * 64, delay))
            await asyncio.gather(*(producer.send(m) for m in messages))
            ahead = started + (first + chunk) / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)


async def lateness_run(namesrv: str, count: int, rate: float) -> dict[str, float]:
    """Send and consume; returns arrival wall time (ms) per UNIQ_KEY."""
    topic = "BenchDelay"
    await create_topic(namesrv, topic, QUEUES)
    arrivals: dict[str, float] = {}

    async def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        now = wall_ms()
        for m in messages:
            arrivals.setdefault(m.uniq_key or "", now)
        return ConsumeStatus.CONSUME_SUCCESS

    settings = ConsumerSettings(pull_batch_size=64, batch_size=16)
    consumer = PushConsumer([namesrv], "bench-delay", settings=settings)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer:
        await until(lambda: len(consumer.assigned) > QUEUES, 30, "queues assigned")  # + %RETRY%
        await send_delayed(namesrv, topic, count, rate, seed=1)
        await until(lambda: len(arrivals) == count, 120, f"all {count} delayed messages")
    return arrivals


def read_lateness(store_dir: Path, arrivals: dict[str, float]) -> dict[str, Any]:
    """Broker and end-to-end lateness per path, from the stopped broker's store."""
    settings = StoreSettings(commit_log_segment_bytes=SEGMENT_BYTES)
    broker: dict[str, list[float]] = {"level": [], "timer": []}
    end_to_end: dict[str, list[float]] = {"level": [], "timer": []}
    with MessageStore(store_dir, settings, background=False) as store:
        for queue_id in store.queue_ids("BenchDelay"):
            offset = store.min_offset("BenchDelay", queue_id)
            while True:
                result = store.get_messages("BenchDelay", queue_id, offset, 256, 1 << 22)
                if not result.records:
                    break
                for record in result.records:
                    copy = decode_record(record)
                    origin_record = store.read_message(int(copy.properties[props.SCHEDULE_ORIGIN]))
                    assert origin_record is not None
                    origin = decode_record(origin_record)
                    if origin.topic == TIMER_TOPIC:
                        path, due = "timer", int(origin.properties[props.TIMER_OUT_MS])
                    else:
                        level = int(origin.properties[props.DELAY_TIME_LEVEL])
                        path, due = "level", LEVELS.due_ms(level, origin.store_timestamp_ms)
                    broker[path].append(copy.store_timestamp_ms - due)
                    end_to_end[path].append(arrivals[copy.uniq_key or ""] - due)
                offset += len(result.records)
    return {
        "broker_ms": summarize(broker),
        "end_to_end_ms": summarize(end_to_end),
    }


def summarize(values: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    every = [v for path in values.values() for v in path]
    return {name: percentiles(v) for name, v in (*values.items(), ("all", every))}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "min": round(ordered[0], 2),
        "p50": at(0.50),
        "p99": at(0.99),
        "max": round(ordered[-1], 2),
    }


# ---------------------------------------------------------------------- retry path
async def retry_run(
    namesrv: str, name: str, count: int, policy: dict[str, Any] | None
) -> dict[str, Any]:
    """Fail once, succeed on redelivery: msg/s from the consumer's start to the last success."""
    topic, group = f"BenchRetry-{name}", f"bench-retry-{name}"
    await create_topic(namesrv, topic, QUEUES)
    async with AdminClient([namesrv]) as admin:
        await admin.create_group(SubscriptionGroupConfig(group, group_retry_policy=policy))
    async with Producer([namesrv]) as producer:
        for first in range(0, count, 64):
            chunk = range(first, min(first + 64, count))
            await asyncio.gather(*(producer.send(Message(topic, b"r" * 64)) for _ in chunk))
    succeeded: set[str] = set()
    deliveries = 0

    async def fail_once(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        nonlocal deliveries
        deliveries += len(messages)
        if messages[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        succeeded.update(m.uniq_key or "" for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    settings = ConsumerSettings(consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer = PushConsumer([namesrv], group, settings=settings)
    consumer.subscribe(topic)
    consumer.register_listener(fail_once)
    started = time.monotonic()
    async with consumer:
        await until(lambda: len(succeeded) == count, 300, f"{name}: all succeeded on redelivery")
        elapsed = time.monotonic() - started
    return {
        "case": name,
        "policy": policy or "delay levels (level 3 = 100 ms)",
        "messages": count,
        "deliveries": deliveries,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(count / elapsed, 1),
    }


# ---------------------------------------------------------------------- running it
def run(messages: int, rate: float, retry_messages: int, data_root: Path) -> dict[str, Any]:
    delay_args = ("--delay-levels", BENCH_LEVELS)
    with servers(data_root, "Async", *delay_args, name="delay-lateness") as running:
        namesrv = running.namesrv
        arrivals = asyncio.run(lateness_run(namesrv, messages, rate))
        retries = [
            asyncio.run(retry_run(namesrv, "levels", retry_messages, None)),
            asyncio.run(retry_run(namesrv, "timer", retry_messages, CUSTOMIZED_100MS)),
        ]
        running.broker.stop()  # clean: the store opens without recovery work
        lateness = read_lateness(running.store, arrivals)
    return {
        "scenario": "delay_lateness",
        "delay_levels": BENCH_LEVELS,
        "timer_delay_ms": list(TIMER_RANGE_MS),
        "messages": messages,
        "rate_msgs_per_s": rate,
        "send_chunk": max(1, round(rate * SEND_TICK_S)),
        "loadavg_after": os.getloadavg(),
        "flush_mode": "Async",
        "lateness": lateness,
        "retry": retries,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.delay_lateness", description=__doc__)
    parser.add_argument("--write-json", type=Path, metavar="JSON", help="write the results here")
    parser.add_argument("--messages", type=int, default=100_000, help="delayed messages")
    parser.add_argument("--rate", type=float, default=2_000, help="delayed sends per second")
    parser.add_argument("--retry-messages", type=int, default=20_000, help="per retry case")
    parser.add_argument(
        "--data-dir", type=Path, help="where the store is created (default: bench/out/data)"
    )
    args = parser.parse_args(argv)
    data_root: Path = args.data_dir or DEFAULT_OUT / "data"
    document = {
        "machine": machine_info(data_root),
        **run(args.messages, args.rate, args.retry_messages, data_root),
    }
    text = json.dumps(document, indent=1)
    if args.write_json is not None:
        args.write_json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.write_json, document)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
