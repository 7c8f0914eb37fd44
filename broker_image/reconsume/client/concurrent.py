"""Concurrent consumption: batches of a queue's messages handed to the listener in parallel.

After the listener returns, RocketMQ's ``processConsumeResult`` decides: in clustering,
messages after ``ack_index`` are sent back for a broker-side retry (or re-consumed locally
after ``local_retry_delay_s``, 5 s by default, when even that fails); in broadcasting, failures
are logged and dropped. Then the queue's offset advances to the smallest message still in
flight: past every message sent back, never past one waiting for its local retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import cast

from reconsume.client.listener import (
    ConcurrentContext,
    ConcurrentListener,
    ConsumeStatus,
    MessageModel,
    call_listener,
    is_async_callable,
)
from reconsume.client.offsets import OffsetStore
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.stats import ConsumerStats
from reconsume.message.model import StoredMessage

log = logging.getLogger(__name__)

LOCAL_RETRY_DELAY_S = 5.0
"""RocketMQ's pause before consuming again a batch that could not be sent back."""

SendBackFn = Callable[[StoredMessage, str, int], Awaitable[bool]]


class ConcurrentService:
    def __init__(
        self,
        listener: ConcurrentListener,
        *,
        model: MessageModel,
        offsets: OffsetStore,
        send_back: SendBackFn,
        restore: Callable[[StoredMessage], StoredMessage],
        batch_size: int,
        concurrency: int,
        executor: ThreadPoolExecutor,
        local_retry_delay_s: float = LOCAL_RETRY_DELAY_S,
        stats: ConsumerStats | None = None,
    ) -> None:
        self._listener = listener
        self._is_async = is_async_callable(listener)
        self._model = model
        self._offsets = offsets
        self._send_back = send_back
        self._restore = restore
        self._batch_size = batch_size
        self._concurrency = concurrency
        self._work: asyncio.Queue[tuple[list[StoredMessage], ProcessQueue]] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._executor = executor
        self._tasks: set[asyncio.Task[None]] = set()
        """Batches waiting for their local retry."""
        self._local_retry_delay_s = local_retry_delay_s
        self.stats = stats or ConsumerStats()

    def submit(self, messages: Sequence[StoredMessage], pq: ProcessQueue) -> None:
        work = self._work
        if work is None:
            work = self._start_workers()
        size = self._batch_size
        if size == 1:
            for message in messages:
                work.put_nowait(([message], pq))
        else:
            for start in range(0, len(messages), size):
                work.put_nowait((list(messages[start : start + size]), pq))

    def _start_workers(self) -> asyncio.Queue[tuple[list[StoredMessage], ProcessQueue]]:
        # A fixed set of ``concurrency`` workers takes batches from one queue: a task per
        # batch cost more than the consumption itself in the consume benchmark.
        work: asyncio.Queue[tuple[list[StoredMessage], ProcessQueue]] = asyncio.Queue()
        self._work = work
        self._workers = [
            asyncio.ensure_future(self._worker(work)) for _ in range(self._concurrency)
        ]
        return work

    async def _worker(self, work: asyncio.Queue[tuple[list[StoredMessage], ProcessQueue]]) -> None:
        while True:
            batch, pq = await work.get()
            try:
                await self._consume(batch, pq)
            except Exception:
                log.exception("consuming %d message(s) of %s failed", len(batch), pq.queue)
            finally:
                work.task_done()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout_s: float) -> None:
        """Wait for queued and running batches (shutdown)."""
        if self._work is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._work.join()

    def cancel(self) -> None:
        for task in [*self._workers, *self._tasks]:
            task.cancel()

    async def _consume(self, batch: list[StoredMessage], pq: ProcessQueue) -> None:
        if not pq.is_active():
            return  # handed over: the next owner reads it from the committed offset
        pq.begin()
        try:
            context = ConcurrentContext(pq.queue)
            status = await self._call([self._restore(m) for m in batch], context)
            await self._process_result(batch, pq, status, context)
        finally:
            pq.end()

    async def _call(
        self, batch: list[StoredMessage], context: ConcurrentContext
    ) -> ConsumeStatus | None:
        result = await call_listener(
            self._listener, self._is_async, self._executor, batch, context, log
        )
        return cast(ConsumeStatus | None, result)

    async def _process_result(
        self,
        batch: list[StoredMessage],
        pq: ProcessQueue,
        status: ConsumeStatus | None,
        context: ConcurrentContext,
    ) -> None:
        if status is ConsumeStatus.CONSUME_SUCCESS:
            ack_index = min(context.ack_index, len(batch) - 1)
        else:
            ack_index = -1
        failed = batch[ack_index + 1 :]
        stats = self.stats
        stats.consumed += len(batch) - len(failed)
        stats.failed += len(failed)
        again: list[StoredMessage] = []
        if failed and self._model is MessageModel.BROADCASTING:
            stats.dropped += len(failed)
            for message in failed:
                log.warning("broadcast message %s failed and is dropped", message.msg_id)
        elif failed:
            level = context.delay_level_when_next_consume
            for message in failed:
                if await self._send_back(message, pq.queue.broker_name, level):
                    continue
                again.append(replace(message, reconsume_times=message.reconsume_times + 1))
        retried = {m.queue_offset for m in again}
        done = [m for m in batch if m.queue_offset not in retried]
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped:
            self._offsets.update(pq.queue, offset)
        if again:
            stats.local_retries += len(again)
            self._spawn(self._later(again, pq))

    async def _later(self, messages: list[StoredMessage], pq: ProcessQueue) -> None:
        await asyncio.sleep(self._local_retry_delay_s)
        if pq.is_active():
            self.submit(messages, pq)
