"""Sending the rows of one write task through the producer.

Without a job, rows are sent in batches (one request per topic and batch). With a job (the
dead-letter jobs' mode), every row comes from a dead letter (columns ``sourceBroker``,
``sourceQueueId``, ``sourceQueueOffset``, in queue order) and the ledger makes a re-run send
each one exactly once: before a batch, a ``sending`` entry records the dead-letter offsets it
covers and where its messages can land; a re-run skips what the ledger says was sent, and for
the one batch that may have been cut short looks its messages up by id at those targets.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import pyarrow as pa

from reconsume.client.broker_api import BrokerApi
from reconsume.client.namesrv import RouteCache
from reconsume.client.producer import Producer
from reconsume.client.pull import pull_once
from reconsume.client.routes import MessageQueue
from reconsume.errors import InvalidArgumentError
from reconsume.spark import ledger
from reconsume.spark.offsets import QueueKey
from reconsume.spark.outgoing import Outgoing, encode_batch_rows
from reconsume.wire.endpoints import RemotingClient

BATCH_BYTES = 1024 * 1024
"""Most bytes of messages one send request carries (a message alone may carry more, up to the
broker's limit of 4 MiB a request)."""


@dataclass(frozen=True, slots=True)
class SendOptions:
    name_servers: tuple[str, ...]
    batch: int = 256
    rate_per_task: float | None = None
    """Most messages per second this task sends; no limit when None."""
    job: str | None = None
    """The dead-letter job whose ledger makes re-sends exactly-once (None: plain sends)."""
    group: str | None = None
    """The consumer group whose dead letters the job handles (names pulls of the ledger)."""
    resume: Mapping[QueueKey, ledger.Resume] = field(default_factory=dict)
    brokers: Mapping[str, str] = field(default_factory=dict)
    """Address per broker name of the dead-letter queues' brokers (where ledger entries go)."""
    timeout_s: float = 10.0
    in_flight: int = 4
    """Batches a task sends at once; with a job, one ledger entry covers them all."""


@dataclass(slots=True)
class Counts:
    """What one task did: messages sent per topic, and rows skipped as already sent."""

    sent: Counter[str] = field(default_factory=Counter)
    skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"sent": dict(self.sent), "skipped": self.skipped}

    @classmethod
    def total(cls, parts: Iterable[Mapping[str, Any]]) -> Counts:
        total = cls()
        for part in parts:
            total.sent.update(part.get("sent", {}))
            total.skipped += int(part.get("skipped", 0))
        return total


@dataclass(slots=True)
class _Window:
    queue: QueueKey
    rows: list[tuple[int, Outgoing]]


class TaskSender:
    """Sends one task's rows; use ``send(rows)`` once per task."""

    def __init__(self, options: SendOptions) -> None:
        self.options = options
        self.counts = Counts()
        self._client = RemotingClient()
        self._api = BrokerApi(self._client, options.timeout_s)
        self._routes = RouteCache(self._client, options.name_servers, timeout_s=options.timeout_s)
        self._producer = Producer(options.name_servers, "reconsume-dlq-jobs")
        self._turn: Counter[str] = Counter()
        self._floor: dict[MessageQueue, int] = {}
        """Per target queue: an offset no later than where the next message lands."""
        self._found: dict[QueueKey, set[str]] = {}
        self._started = time.monotonic()
        self._paced = 0

    async def close(self) -> None:
        await self._producer.close()
        await self._client.close()

    async def send(
        self, batches: Iterable[pa.RecordBatch] | AsyncIterable[pa.RecordBatch]
    ) -> Counts:
        """Send the rows of ``batches`` (see reconsume.spark.writer for the columns): a
        writer's from Spark, or a Reprocess task's as it reads them on this loop."""
        stream = batches if isinstance(batches, AsyncIterable) else _each(batches)
        if self.options.job is None:
            await self._send_plain(stream)
        else:
            await self._send_tracked(stream)
        return self.counts

    # ------------------------------------------------------------------ plain
    async def _send_plain(self, batches: AsyncIterable[pa.RecordBatch]) -> None:
        pending: list[Outgoing] = []
        async for batch in batches:
            uniq = [self._producer.new_id() for _ in range(batch.num_rows)]
            for row in encode_batch_rows(batch, uniq, keep_own_ids=True):
                pending.append(row)
                if len(pending) >= self._size:
                    await self._send_rows(pending)
                    pending = []
        if pending:
            await self._send_rows(pending)

    async def _send_rows(self, rows: Sequence[Outgoing]) -> None:
        sends = await self._batches(rows)
        await self._pace(len(rows))
        await self._send_all(sends)

    async def _batches(self, rows: Sequence[Outgoing]) -> list[tuple[list[Outgoing], MessageQueue]]:
        """``rows`` in batches of the batch size, each batch's rows of one topic for a queue
        of their own (round robin over the topic's queues)."""
        sends: list[tuple[list[Outgoing], MessageQueue]] = []
        batch = self.options.batch
        for at in range(0, len(rows), batch):
            by_topic: dict[str, list[Outgoing]] = {}
            for row in rows[at : at + batch]:
                by_topic.setdefault(row.topic, []).append(row)
            for topic, group in by_topic.items():
                sends.append((group, await self._next_queue(topic)))
        return sends

    async def _send_all(self, sends: Sequence[tuple[list[Outgoing], MessageQueue]]) -> None:
        await asyncio.gather(*(self._send_group(group, queue) for group, queue in sends))
        for group, queue in sends:
            self.counts.sent[queue.topic] += len(group)

    # ------------------------------------------------------------------ tracked
    async def _send_tracked(self, batches: AsyncIterable[pa.RecordBatch]) -> None:
        window: _Window | None = None
        last: QueueKey | None = None
        last_offset = -1
        job, size, resume = self._job, self._size, self.options.resume
        async for batch in batches:
            queues, offsets, uniq = _sources(job, batch)
            rows = encode_batch_rows(batch, uniq)
            for queue, offset, row in zip(queues, offsets, rows, strict=True):
                # identity first: the rows of one run share their QueueKey
                same = last is queue or last == queue
                if same and offset <= last_offset:
                    raise InvalidArgumentError(
                        f"rows of {queue} are not in offset order at {offset}"
                    )
                if window is not None and (not same or len(window.rows) >= size):
                    await self._flush(window, final=not same)
                    window = None
                last, last_offset = queue, offset
                if queue in resume and await self._already_sent(queue, offset):
                    self.counts.skipped += 1
                    continue
                if window is None:
                    window = _Window(queue, [])
                window.rows.append((offset, row))
        if window is not None:
            await self._flush(window, final=True)
        elif last is not None:
            await self._mark_sent(last, last_offset + 1)

    @property
    def _size(self) -> int:
        """Rows of one ledger window: ``in_flight`` batches (a tenth of a second's worth at
        most, under a rate limit)."""
        rate = self.options.rate_per_task
        window = self.options.batch * max(1, self.options.in_flight)
        if rate is None:
            return window
        return max(1, min(window, int(rate // 10)))

    async def _already_sent(self, queue: QueueKey, offset: int) -> bool:
        resume = self.options.resume.get(queue)
        if resume is None:
            return False
        if offset < resume.done:
            return True
        pending = resume.pending
        if pending is None or not pending.start <= offset < pending.end:
            return False
        found = self._found.get(queue)
        if found is None:
            found = self._found[queue] = await self._scan(pending.targets)
        assert self.options.job is not None
        return ledger.message_key(self.options.job, queue, offset) in found

    async def _scan(self, marks: Sequence[ledger.TargetMark]) -> set[str]:
        """Message ids stored in the marked target queues from the marked offsets on."""
        keys: set[str] = set()
        group = self.options.group or "reconsume-dlq-jobs"
        for mark in marks:
            route = await self._routes.get(mark.topic, refresh=True)
            address = route.master_of(mark.broker) if route is not None else None
            if address is None:
                raise InvalidArgumentError(f"cannot check {mark}: its broker has no master")
            queue = MessageQueue(mark.topic, mark.broker, mark.queue_id)
            offset, end = mark.offset, await self._api.max_offset(address, queue)
            while offset < end:
                result = await pull_once(api=self._api, address=address, queue=queue,
                                         offset=offset, group=group, max_nums=64)  # fmt: skip
                keys.update(m.uniq_key for m in result.messages if m.uniq_key)
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
        return keys

    async def _flush(self, window: _Window, *, final: bool) -> None:
        """Record the window in the ledger, then send its batches, all at once: each batch's
        messages of one topic to a queue of their own (the entry marks every queue chosen,
        so a re-run finds whatever of the window landed)."""
        sends = await self._batches([row for _, row in window.rows])
        marks = {
            ledger.TargetMark(q.topic, q.broker_name, q.queue_id, await self._floor_of(q))
            for _, q in sends
        }
        start, end = window.rows[0][0], window.rows[-1][0] + 1
        resume = self.options.resume.get(window.queue)
        if resume is not None and resume.pending is not None and start < resume.pending.end:
            marks.update(resume.pending.targets)  # what an earlier attempt may have sent
        entry = ledger.Entry(self._job, ledger.SENDING, window.queue, start, end,
                             tuple(sorted(marks)))  # fmt: skip
        # Paced before the entry, so the sends follow it at once: a re-run waits for a quiet
        # ledger (jobs/main.py) and a pause between an entry and its sends would hide them.
        await self._pace(len(window.rows))
        await self._write(window.queue, entry)
        await self._send_all(sends)
        if final:
            await self._mark_sent(window.queue, end)

    async def _mark_sent(self, queue: QueueKey, end: int) -> None:
        await self._write(queue, ledger.Entry(self._job, ledger.SENT, queue, end, end))

    @property
    def _job(self) -> str:
        assert self.options.job is not None
        return self.options.job

    async def _write(self, queue: QueueKey, entry: ledger.Entry) -> None:
        address = self.options.brokers.get(queue.broker)
        if address is None:
            raise InvalidArgumentError(f"no address for broker {queue.broker} of {queue}")
        await ledger.append(self._producer, address, queue.broker, entry)

    # ------------------------------------------------------------------ sending
    async def _next_queue(self, topic: str) -> MessageQueue:
        route = await self._routes.for_sending(topic)
        queues = route.write_queues
        if not queues:
            raise InvalidArgumentError(f"topic {topic} has no writable queue")
        if topic not in self._turn:  # tasks start at different queues, as producers do
            self._turn[topic] = random.randrange(len(queues))
        queue = queues[self._turn[topic] % len(queues)]
        self._turn[topic] += 1
        return queue

    async def _floor_of(self, queue: MessageQueue) -> int:
        floor = self._floor.get(queue)
        if floor is None:
            route = await self._routes.get(queue.topic)
            address = route.master_of(queue.broker_name) if route is not None else None
            if address is None:
                raise InvalidArgumentError(f"broker {queue.broker_name} has no master")
            floor = self._floor[queue] = await self._api.max_offset(address, queue)
        return floor

    async def _send_group(self, rows: Sequence[Outgoing], queue: MessageQueue) -> None:
        """Send ``rows`` to ``queue``, in order, in as few requests as the batch size, the
        byte limit and the rows allow: a delayed message goes on its own, and a batch to a
        retry or dead-letter topic holds rows of the same reconsume times (its header holds
        one)."""
        pending: list[Outgoing] = []
        size = 0
        for row in rows:
            if pending and (
                row.alone is not None
                or row.retry != pending[0].retry
                or size + len(row.item) > BATCH_BYTES
            ):
                await self._send_batch(pending, queue)
                pending, size = [], 0
            if row.alone is not None:
                result = await self._producer.send(row.alone, queue=queue)
                self._floor[queue] = result.queue_offset + 1
                continue
            pending.append(row)
            size += len(row.item)
        if pending:
            await self._send_batch(pending, queue)

    async def _send_batch(self, rows: Sequence[Outgoing], queue: MessageQueue) -> None:
        result = await self._producer.send_items(
            queue.topic, [row.item for row in rows], [row.uniq for row in rows], queue=queue,
            retry=rows[0].retry,
        )  # fmt: skip
        self._floor[queue] = result.queue_offset + len(rows)

    async def _pace(self, count: int) -> None:
        rate = self.options.rate_per_task
        if rate is not None:
            due = self._started + self._paced / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        self._paced += count


def _sources(job: str, batch: pa.RecordBatch) -> tuple[list[QueueKey], list[int], list[str]]:
    """Per row of ``batch``: the dead-letter queue and offset it comes from, and the unique
    id the job gives its message (rows of one queue come in runs, usually one a batch)."""
    brokers = batch.column("sourceBroker").to_pylist()
    queue_ids = batch.column("sourceQueueId").to_pylist()
    offsets = [int(o) for o in batch.column("sourceQueueOffset").to_pylist()]
    queues: list[QueueKey] = []
    uniq: list[str] = []
    start, count = 0, len(offsets)
    while start < count:
        broker, queue_id = brokers[start], queue_ids[start]
        end = start + 1
        while end < count and brokers[end] == broker and queue_ids[end] == queue_id:
            end += 1
        queue = QueueKey(str(broker), int(queue_id))
        queues.extend(repeat(queue, end - start))
        uniq.extend(ledger.message_keys(job, queue, offsets[start:end]))
        start = end
    return queues, offsets, uniq


async def _each(batches: Iterable[pa.RecordBatch]) -> AsyncIterator[pa.RecordBatch]:
    for batch in batches:
        yield batch


def send_batches(options: SendOptions, batches: Iterator[pa.RecordBatch]) -> Counts:
    """Send the rows of ``batches`` on an event loop of this thread (a Spark task's)."""
    loop = asyncio.new_event_loop()
    sender = TaskSender(options)
    try:
        return loop.run_until_complete(sender.send(batches))
    finally:
        loop.run_until_complete(sender.close())
        loop.close()
