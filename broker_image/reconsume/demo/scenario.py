"""The demo's story, step by step, on a real name server, real brokers and real Spark.

1. Embedded mode starts the cluster, topic and consumer group of ``<dir>/manifests``.
2. The payment service is down. Orders arrive; every delivery fails and is sent back: the
   broker holds each retry for its delay (the cluster's delay levels, shortened), redelivers it
   through ``%RETRY%<group>``, and after ``retryMaxTimes`` stores it in ``%DLQ%<group>``.
3. A Drain DeadLetterJob archives the legacy-checkout orders (no payment takes them) as
   Parquet; the others stay in the dead-letter queue.
4. The payment service recovers; a Reprocess DeadLetterJob sends the rest back to ``orders``,
   and the consumer pays them.
5. Checks: every order is paid or archived, none both, none missing.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from reconsume.client.listener import ConcurrentContext, ConsumeFrom, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.demo import manifests
from reconsume.demo.payment import OK, PaymentService, charge
from reconsume.demo.progress import Progress
from reconsume.demo.view import View
from reconsume.embedded.environment import Environment
from reconsume.embedded.jobs import FAILED, SUCCEEDED
from reconsume.message.model import Message, StoredMessage

SAMPLE_INTERVAL_S = 0.5
SYNC_INTERVAL_S = 1.0
JOB_TIMEOUT_S = 240.0


class DemoFailed(Exception):
    """A step did not happen in time, or a job failed."""


def order_id(number: int) -> str:
    return f"order-{number:04d}"


def checkout(number: int, plan: manifests.Plan) -> str:
    """Every (orders / legacy)-th order comes from the legacy checkout."""
    step = max(1, plan.orders // max(1, plan.legacy))
    return (
        "legacy"
        if plan.legacy and number % step == 0 and number // step <= plan.legacy
        else ("web" if number % 2 else "mobile")
    )


class Scenario:
    def __init__(
        self, directory: Path, plan: manifests.Plan, progress: Progress, view: View
    ) -> None:
        self.directory = directory
        self.plan = plan
        self.progress = progress
        self.view = view
        self.manifests = directory / "manifests"
        self.archive = directory / "archive"
        self.environment = Environment(directory / "data", [self.manifests], namesrv_port=0)
        self.payment = PaymentService()
        self.consumer: PushConsumer | None = None
        self.legacy_orders = {
            order_id(n) for n in range(1, plan.orders + 1) if checkout(n, plan) == "legacy"
        }

    # ------------------------------------------------------------------ steps
    def say(self, text: str, *, phase: str | None = None, mark: str | None = None) -> None:
        if phase is not None:
            self.progress.phase = phase
        self.progress.event(text, mark=mark)
        self.view.event(self.progress)

    async def run(self) -> None:
        for name, document in manifests.topology(self.plan).items():
            manifests.write(self.manifests, name, document)
        brokers = self.plan.brokers
        self.say(f"starting a name server and {brokers} broker(s) from {self.manifests}",
                 phase="starting")  # fmt: skip
        await self.environment.start()
        background = [asyncio.create_task(self._syncer())]
        try:
            await self.until(self._group_ready, 30.0, "the consumer group to be configured")
            name_server = self._name_server()
            self.say(f"cluster {manifests.CLUSTER} up (name server {name_server}); topic "
                     f"{manifests.TOPIC} and group {manifests.GROUP} configured: retries after "
                     f"{', '.join(self.plan.delays)}, then the dead-letter queue")  # fmt: skip
            await self.payment.start()
            self.say(f"payment service at {self.payment.address} is DOWN",
                     phase="payment service down: every delivery fails",
                     mark="payment down")  # fmt: skip
            background.append(asyncio.create_task(self._sampler()))
            await self._consume(name_server)
            await self._produce(name_server)
            await self.until(
                lambda: self.progress.dlq_depth >= self.plan.orders and self.progress.waiting == 0,
                30.0 + 4 * sum(_seconds(d) for d in self.plan.delays),
                "every order to reach the dead-letter queue",
            )
            self.say(f"all {self.plan.orders} orders are dead letters after "
                     f"{len(self.plan.delays)} retries each",
                     phase="dead letters: waiting for someone to act")  # fmt: skip
            await self._job(*manifests.drain(self.archive), "Drain", "archive legacy orders")
            self.payment.up = True
            self.say("payment service is UP again", phase="payment service recovered",
                     mark="payment up")  # fmt: skip
            await self._job(*manifests.reprocess(self.plan), "Reprocess", "re-send the rest")
            expected = self.plan.orders - len(self.legacy_orders)
            await self.until(
                lambda: len(self.progress.paid) >= expected and self.progress.retry_depth == 0,
                60.0,
                "the re-sent orders to be paid",
            )
            await self.until(lambda: self.progress.dlq_depth == 0, 30.0, "an empty DLQ")
            self.say(f"{len(self.progress.paid)} orders paid; dead-letter queue empty",
                     phase="done", mark="all paid")  # fmt: skip
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self._scrape()
            self.progress.sample()

    async def stop(self) -> None:
        if self.consumer is not None:
            await self.consumer.shutdown()
        await self.environment.stop()
        await self.payment.stop()

    # ------------------------------------------------------------------ pieces
    def _group_ready(self) -> bool:
        return any(
            key[0] == "ConsumerGroup" and state.ready
            for key, state in self.environment.objects.items()
        ) and all(state.ready for state in self.environment.objects.values())

    def _name_server(self) -> str:
        (cluster,) = self.environment.clusters.values()
        assert cluster.name_server is not None
        return cluster.name_server

    async def _consume(self, name_server: str) -> None:
        # A consumer's own maxReconsumeTimes (RocketMQ clients send 16 unless set) overrides the
        # group's retryMaxTimes on the broker, so it is set to the group's (docs/retry.md).
        settings = ConsumerSettings(
            consume_from=ConsumeFrom.FIRST_OFFSET, max_reconsume_times=self.plan.max_times,
            rebalance_interval_s=2.0, persist_interval_s=1.0, long_poll_ms=2_000,
        )  # fmt: skip
        consumer = PushConsumer([name_server], manifests.GROUP, settings=settings)
        consumer.subscribe(manifests.TOPIC, "*")
        consumer.register_listener(self._listener)
        await consumer.start()
        self.consumer = consumer
        await self.until(lambda: bool(consumer.assigned), 30.0, "the consumer to get queues")

    async def _listener(
        self, messages: list[StoredMessage], context: ConcurrentContext
    ) -> ConsumeStatus:
        status = ConsumeStatus.CONSUME_SUCCESS
        for message in messages:
            order = json.loads(message.body)
            self.progress.attempts += 1
            code = await charge(self.payment.address, order["order"], order["checkout"])
            if code == OK:
                if order["order"] in self.progress.paid:
                    self.progress.duplicates += 1
                self.progress.paid.add(order["order"])
            else:
                self.progress.failed += 1
                status = ConsumeStatus.RECONSUME_LATER
        return status

    async def _produce(self, name_server: str) -> None:
        self.say(f"producing {self.plan.orders} orders "
                 f"({len(self.legacy_orders)} from the legacy checkout)",
                 phase="orders arriving; payment down")  # fmt: skip
        pause = self.plan.produce_over_s / self.plan.orders
        async with Producer([name_server], "PID_demo_shop") as producer:
            for number in range(1, self.plan.orders + 1):
                order, source = order_id(number), checkout(number, self.plan)
                body = {"order": order, "checkout": source, "amountCents": 1000 + 37 * number}
                message = Message(manifests.TOPIC, json.dumps(body).encode())
                message.tags = source
                message.keys = [order]
                await producer.send(message)
                self.progress.produced += 1
                await asyncio.sleep(pause)

    async def _job(self, name: str, document: dict[str, object], action: str, why: str) -> None:
        manifests.write(self.manifests, name, document)
        job = str(document["metadata"]["name"])  # type: ignore[index]
        self.say(f"applying {name}: a {action} DeadLetterJob to {why} (Spark, local mode)",
                 phase=f"{action} job running on Spark", mark=f"{action} job")  # fmt: skip
        await self.environment.sync()
        key = ("DeadLetterJob", "default", job)

        def finished() -> bool:
            state = self.environment.jobs.state(key)
            return state is not None and state.phase in (SUCCEEDED, FAILED) and state.runs > 0

        await self.until(finished, JOB_TIMEOUT_S, f"the {action} job to finish")
        state = self.environment.jobs.state(key)
        assert state is not None
        if state.phase == FAILED:
            raise DemoFailed(f"the {action} job failed: {state.message} (log {state.log})")
        counts = state.counts
        self.progress.archived += counts.get("archived", 0)
        self.progress.resent += counts.get("resent", 0)
        self.progress.kept = counts.get("kept", 0)
        summary = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        self.say(f"{action} job succeeded: {summary}")

    async def until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait for ``condition`` (checked every 0.1 s) or fail naming ``what``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            if loop.time() > deadline:
                raise DemoFailed(f"timed out after {timeout_s:.0f} s waiting for {what}")
            await asyncio.sleep(0.1)

    async def _every(self, interval_s: float, action: Callable[[], Awaitable[None]]) -> None:
        while True:
            await action()
            await asyncio.sleep(interval_s)

    async def _sampler(self) -> None:
        async def sample() -> None:
            await self._scrape()
            self.progress.sample()
            self.view.refresh(self.progress)

        await self._every(SAMPLE_INTERVAL_S, sample)

    async def _syncer(self) -> None:
        await self._every(SYNC_INTERVAL_S, self.environment.sync)

    async def _scrape(self) -> None:
        """Depths from the brokers' ``/metrics``: what Prometheus would see."""
        (cluster,) = self.environment.clusters.values()
        texts = await asyncio.gather(
            *(
                asyncio.to_thread(_get, f"http://{a}/metrics")
                for a in cluster.broker_http().values()
            ),
            return_exceptions=True,
        )
        totals = dict.fromkeys(("waiting", "retry", "dlq", "dead"), 0.0)
        for text in texts:
            if isinstance(text, BaseException):
                continue
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    name, labels, value = sample.name, sample.labels, sample.value
                    if name in ("reconsume_schedule_pending", "reconsume_timer_pending"):
                        totals["waiting"] += value
                    elif labels.get("group") != manifests.GROUP:
                        continue
                    elif name == "reconsume_retry_depth":
                        totals["retry"] += value
                    elif name == "reconsume_dead_letter_depth":
                        totals["dlq"] += value
                    elif name == "reconsume_dead_letters_total":
                        totals["dead"] += value
        self.progress.waiting = int(totals["waiting"])
        self.progress.retry_depth = int(totals["retry"])
        self.progress.dlq_depth = int(totals["dlq"])
        self.progress.dead_lettered = int(totals["dead"])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit):
            return float(duration[: -len(unit)]) * units[unit]
    return float(duration)
