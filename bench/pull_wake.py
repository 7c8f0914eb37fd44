"""How soon a waiting consumer sees a new message: long polling's wake-up, end to end.

    python -m bench.pull_wake --write-json bench/out/pull_wake.json

Real ``reconsume namesrv`` and ``reconsume broker`` processes on 127.0.0.1 (``bench.servers``:
64 MiB segments), once with Sync and once with Async flush; the clients run in this process.
One push consumer waits on a topic of ``QUEUES`` queues; one producer sends ``messages``
messages one at a time, each once the broker holds a pull on every queue of the topic and of its
retry topic again (``reconsume_long_poll_suspended``). Per message: *ack* = the send call until
its answer; *seen* = the send call until the listener is called with it (what the
waiting-consumer test holds to 50 ms).
Results (JSON): p50 / p99 / max of both in ms per flush mode, and the broker's count of held
pulls a message woke (``reconsume_long_poll_woken_total``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_OUT, machine_info, write_json
from bench.delay_lateness import percentiles, until
from bench.servers import create_topic, servers
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.message.model import Message, StoredMessage

TOPIC = "BenchWake"
QUEUES = 4
WOKEN = "reconsume_long_poll_woken_total"
HELD = "reconsume_long_poll_suspended"


def metric(http: str, name: str) -> float:
    """An unlabelled sample of the broker's ``/metrics`` at ``http`` (0 when absent)."""
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def measure(namesrv: str, http: str, messages: int) -> tuple[list[float], list[float]]:
    await create_topic(namesrv, TOPIC, QUEUES)
    arrivals: dict[str, float] = {}
    arrived = asyncio.Event()

    async def listener(batch: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        now = time.perf_counter()
        for message in batch:
            arrivals[message.uniq_key or ""] = now
        arrived.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer([namesrv], "bench-wake")
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    acks: list[float] = []
    seen: list[float] = []
    async with consumer, Producer([namesrv]) as producer:
        # The topic's queues and %RETRY%'s.
        await until(lambda: len(consumer.assigned) > QUEUES, 30, "queues assigned")
        for i in range(messages + 1):  # the first warms both connections up, unmeasured

            async def all_held() -> bool:
                return await asyncio.to_thread(metric, http, HELD) >= QUEUES + 1

            await until(all_held, 10, "a pull held on every queue")
            arrived.clear()
            started = time.perf_counter()
            result = await producer.send(Message(TOPIC, b"w%d" % i))
            acked = time.perf_counter()
            async with asyncio.timeout(10):
                while result.msg_id not in arrivals:
                    await arrived.wait()
                    arrived.clear()
            if i:
                acks.append((acked - started) * 1000)
                seen.append((arrivals[result.msg_id] - started) * 1000)
    return acks, seen


def run(messages: int, data_root: Path) -> dict[str, Any]:
    modes = {}
    for flush in ("Sync", "Async"):
        with servers(data_root, flush, "--http-listen", "127.0.0.1:0", name="pull-wake") as up:
            http = next(
                line.rsplit(" ", 1)[1].strip()
                for line in up.broker.output
                if "serving HTTP on" in line
            )
            before = metric(http, WOKEN)
            acks, seen = asyncio.run(measure(up.namesrv, http, messages))
            modes[flush] = {
                "ack_ms": percentiles(acks),
                "seen_ms": percentiles(seen),
                "pulls_woken": metric(http, WOKEN) - before,
            }
    return {"scenario": "pull_wake", "messages": messages, "flush": modes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pull_wake", description=__doc__)
    parser.add_argument("--write-json", type=Path, metavar="JSON", help="write the results here")
    parser.add_argument("--messages", type=int, default=1_000, help="messages per flush mode")
    parser.add_argument(
        "--data-dir", type=Path, help="where the stores are created (default: bench/out/data)"
    )
    args = parser.parse_args(argv)
    data_root: Path = args.data_dir or DEFAULT_OUT / "data"
    document = {"machine": machine_info(data_root), **run(args.messages, data_root)}
    if args.write_json is not None:
        args.write_json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.write_json, document)
    print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
