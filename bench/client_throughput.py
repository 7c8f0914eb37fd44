"""Produce and consume throughput over loopback with reconsume's own client.

Real ``reconsume namesrv`` and ``reconsume broker`` processes on 127.0.0.1 (one broker, 64 MiB
segments, a fresh store per flush mode); the clients are separate ``bench.client_worker``
processes, one per producer, so four producers are four interpreters (no shared GIL).

* produce: 1 KiB bodies to a topic of 8 queues; a producer sends one message at a time (one
  request in flight). Sync and Async flush brokers, 1 and 4 producers. Each worker warms up
  (its connection, routes, the broker's code paths) before the clock starts; then every run
  lasts ``client_seconds`` and all producers start and stop together. Throughput is all
  sends over the time from the first start to the last end.
* consume: a topic pre-filled with ``consume_messages`` (batch sends), drained by one
  PushConsumer per run (a new group each time, from the first offset); the clock runs from
  ``start()`` until the listener has seen every message. Async broker only (flushing does
  not touch the read path). The worker first drains a small warm-up topic.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, Sizes, body_of, median
from bench.servers import Running, cpu_seconds, create_topic, servers
from reconsume.client.producer import Producer
from reconsume.message.model import Message

TOPIC = "BenchProduce"
CONSUME_TOPIC = "BenchConsume"
WARMUP_TOPIC = "BenchConsumeWarmup"
QUEUES = 8
FLUSH_MODES = ("Sync", "Async")
PRODUCER_COUNTS = (1, 4)
FILL_BATCH = 32
FILL_IN_FLIGHT = 8
_START_DELAY_S = 0.2
"""Workers get their start time this far ahead, so all of them are waiting when it comes."""


class Worker:
    """A ``bench.client_worker`` process: one JSON line in, one JSON line out."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(BENCH_DIR.parent), env.get("PYTHONPATH")) if p
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.client_worker", *args],
            cwd=BENCH_DIR.parent,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put("")

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_s: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"client worker {self.pid} gave no answer in {timeout_s:g}s"
            ) from None
        if not line:
            raise RuntimeError(f"client worker {self.pid} exited with {self.process.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            try:
                self.process.stdin.close()  # end of input: the worker leaves
                self.process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
        self.process.wait()


def _percentile(ordered: list[int], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] / 1000


def _summary(runs: list[dict[str, Any]], body_bytes: int) -> dict[str, Any]:
    rates = [r["msgs_per_s"] for r in runs]
    mid = median(rates)
    return {
        "msgs_per_s": mid,
        "msgs_per_s_best": max(rates),
        "mb_per_s": mid * body_bytes / 1e6,
        "broker_cpu_pct": median([r["broker_cpu_s"] / r["seconds"] * 100 for r in runs]),
        "client_cpu_pct": median([r["client_cpu_s"] / r["seconds"] * 100 for r in runs]),
        # CPU per message: less sensitive to other load on the machine than msg/s.
        "broker_cpu_us_per_msg": median([r["broker_cpu_s"] / r["messages"] * 1e6 for r in runs]),
        "client_cpu_us_per_msg": median([r["client_cpu_s"] / r["messages"] * 1e6 for r in runs]),
    }


def _timed_runs(
    workers: list[Worker], server_pid: int, sizes: Sizes, label: str, log: Callable[[str], None]
) -> tuple[list[dict[str, Any]], list[int]]:
    """``sizes.client_repeats`` runs of ready workers sending together; the runs and every
    send's latency in µs."""
    runs: list[dict[str, Any]] = []
    latencies: list[int] = []
    for attempt in range(sizes.client_repeats):
        start_at = time.monotonic() + _START_DELAY_S
        command = {"start_at": start_at, "end_at": start_at + sizes.client_seconds}
        server_cpu = cpu_seconds(server_pid)
        for worker in workers:
            worker.send(command)
        answers = [w.receive(sizes.client_seconds + 60) for w in workers]
        server_cpu = cpu_seconds(server_pid) - server_cpu
        seconds = max(a["ended"] for a in answers) - min(a["started"] for a in answers)
        sends = sum(a["sends"] for a in answers)
        for answer in answers:
            latencies.extend(answer["latencies_us"])
        runs.append(
            {
                "messages": sends,
                "seconds": seconds,
                "msgs_per_s": sends / seconds,
                "broker_cpu_s": server_cpu,
                "client_cpu_s": sum(a["cpu_seconds"] for a in answers),
            }
        )
        log(f"  {label} run {attempt + 1}/{sizes.client_repeats}: {sends / seconds:,.0f} msg/s")
    return runs, sorted(latencies)


def _timed_row(runs: list[dict[str, Any]], latencies: list[int], sizes: Sizes) -> dict[str, Any]:
    return {
        "messages": sum(r["messages"] for r in runs),
        "runs": runs,
        **_summary(runs, sizes.body_bytes),
        "latency_p50_ms": _percentile(latencies, 0.50),
        "latency_p99_ms": _percentile(latencies, 0.99),
    }


def produce_case(
    running: Running, sizes: Sizes, producers: int, log: Callable[[str], None], topic: str = TOPIC
) -> dict[str, Any]:
    """``producers`` worker processes sending to ``topic``, ``sizes.client_repeats`` runs."""
    args = ["produce", "--namesrv", running.namesrv, "--topic", topic]
    args += ["--body-bytes", str(sizes.body_bytes), "--warmup-sends", str(sizes.warmup_sends)]
    workers = [Worker(*args) for _ in range(producers)]
    try:
        for worker in workers:
            worker.receive(120)
        label = f"produce {running.flush_mode} x{producers}"
        runs, latencies = _timed_runs(workers, running.broker.pid, sizes, label, log)
    finally:
        for worker in workers:
            worker.close()
    return {
        "flush_mode": running.flush_mode,
        "producers": producers,
        **_timed_row(runs, latencies, sizes),
    }


def floor_case(sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """The loopback floor: one uvloop client and one uvloop echo server exchanging send-sized
    requests and response-sized answers, one in flight, timed like one producer."""
    server = Worker("echo-server", "--body-bytes", str(sizes.body_bytes))
    workers: list[Worker] = []
    try:
        port = server.receive(60)["port"]
        args = ["echo", "--port", str(port), "--body-bytes", str(sizes.body_bytes)]
        workers.append(Worker(*args, "--warmup-sends", str(sizes.warmup_sends)))
        workers[0].receive(60)
        runs, latencies = _timed_runs(workers, server.pid, sizes, "floor (echo)", log)
    finally:
        for worker in [*workers, server]:
            worker.close()
    return _timed_row(runs, latencies, sizes)


async def fill(namesrv: str, topic: str, total: int, body: bytes) -> None:
    """Store ``total`` messages in ``topic`` (batches of 32, round robin over its queues)."""
    await create_topic(namesrv, topic, QUEUES)
    async with Producer([namesrv], "bench-fill") as producer:
        slots = asyncio.Semaphore(FILL_IN_FLIGHT)

        async def batch(count: int) -> None:
            async with slots:
                await producer.send_batch(
                    [Message(topic, body, {"TAGS": "TagA"}) for _ in range(count)]
                )

        sizes = [min(FILL_BATCH, total - n) for n in range(0, total, FILL_BATCH)]
        await asyncio.gather(*(batch(n) for n in sizes))


def fill_consume_topics(running: Running, sizes: Sizes, log: Callable[[str], None]) -> float:
    """Store the consume topic's and the warm-up topic's messages; the seconds it took."""
    body = body_of(sizes.body_bytes)
    started = time.perf_counter()
    asyncio.run(fill(running.namesrv, CONSUME_TOPIC, sizes.consume_messages, body))
    if sizes.consume_warmup_messages > 0:
        asyncio.run(fill(running.namesrv, WARMUP_TOPIC, sizes.consume_warmup_messages, body))
    seconds = time.perf_counter() - started
    log(f"  consume: {sizes.consume_messages:,} messages stored in {seconds:.1f} s")
    return seconds


def consume_case(
    running: Running, sizes: Sizes, log: Callable[[str], None], fill_seconds: float = 0.0
) -> dict[str, Any]:
    """One consumer process draining the filled topic, ``sizes.client_repeats`` runs."""
    total, warmup = sizes.consume_messages, sizes.consume_warmup_messages
    worker = Worker(
        "consume", "--namesrv", running.namesrv, "--topic", CONSUME_TOPIC, "--total", str(total),
        "--warmup-topic", WARMUP_TOPIC, "--warmup-total", str(warmup),
    )  # fmt: skip
    timeout_s = 120 + total / 1000
    runs: list[dict[str, Any]] = []
    try:
        worker.receive(timeout_s)
        for attempt in range(sizes.client_repeats):
            broker_cpu = cpu_seconds(running.broker.pid)
            worker.send({"group": f"bench-consumer-{attempt}"})
            answer = worker.receive(timeout_s)
            broker_cpu = cpu_seconds(running.broker.pid) - broker_cpu
            rate = answer["consumed"] / answer["seconds"]
            runs.append(
                {
                    "messages": answer["consumed"],
                    "seconds": answer["seconds"],
                    "start_seconds": answer["start_seconds"],
                    "msgs_per_s": rate,
                    "broker_cpu_s": broker_cpu,
                    "client_cpu_s": answer["cpu_seconds"],
                }
            )
            log(f"  consume run {attempt + 1}/{sizes.client_repeats}: {rate:,.0f} msg/s")
    finally:
        worker.close()
    return {
        "flush_mode": running.flush_mode,
        "messages": total,
        "fill_seconds": fill_seconds,
        "runs": runs,
        "seconds": median([r["seconds"] for r in runs]),
        **_summary(runs, sizes.body_bytes),
    }


def run(sizes: Sizes, data_root: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    from bench.client_worker import event_loop_name

    produce: list[dict[str, Any]] = []
    consume: list[dict[str, Any]] = []
    floor = floor_case(sizes, log)
    for flush_mode in FLUSH_MODES:
        with servers(data_root, flush_mode) as running:
            reads = flush_mode == "Async"
            # Filled first: its writes are flushed by the time the consumer runs.
            fill_seconds = fill_consume_topics(running, sizes, log) if reads else 0.0
            asyncio.run(create_topic(running.namesrv, TOPIC, QUEUES))
            produce += [produce_case(running, sizes, n, log) for n in PRODUCER_COUNTS]
            if reads:
                consume.append(consume_case(running, sizes, log, fill_seconds))
    return {
        "scenario": "client_throughput",
        "body_bytes": sizes.body_bytes,
        "queues": QUEUES,
        "brokers": 1,
        "event_loop": event_loop_name(),
        "client_seconds": sizes.client_seconds,
        "repeats": sizes.client_repeats,
        "warmup_sends": sizes.warmup_sends,
        "consume_warmup_messages": sizes.consume_warmup_messages,
        "produce": produce,
        "consume": consume,
        "floor": floor,
    }
