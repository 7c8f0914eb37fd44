"""Orderly consumption: one queue's messages strictly in order, one batch at a time.

In clustering the queue must be locked on its broker (LOCK_BATCH_MQ) so no other consumer of
the group reads it meanwhile. A failure suspends the queue and re-consumes the same messages
after a pause with ``reconsumeTimes + 1``; at the maximum the message is sent back so the
broker moves it to the dead-letter queue, and the queue moves on (RocketMQ's
``ConsumeMessageOrderlyService``). In broadcasting nothing is sent back: a message failed
the maximum number of times is dropped, as broadcasting failures are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import cast

from reconsume.client.listener import (
    MessageModel,
    OrderlyContext,
    OrderlyListener,
    OrderlyStatus,
    call_listener,
    is_async_callable,
)
from reconsume.client.offsets import OffsetStore
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.stats import ConsumerStats
from reconsume.message.model import StoredMessage

log = logging.getLogger(__name__)

MIN_SUSPEND_MS = 10
MAX_SUSPEND_MS = 30_000
LOCK_RETRY_S = 0.1

DeadLetterFn = Callable[[StoredMessage, str], Awaitable[bool]]
LockFn = Callable[[ProcessQueue], Awaitable[bool]]


def suspend_s(requested_ms: int, default_ms: int) -> float:
    """How long a queue pauses after a failure: the listener's request (-1: the consumer's
    default), clamped to 10 ms - 30 s as RocketMQ clamps it."""
    pause_ms = default_ms if requested_ms < 0 else requested_ms
    return min(max(pause_ms, MIN_SUSPEND_MS), MAX_SUSPEND_MS) / 1000


class OrderlyService:
    def __init__(
        self,
        listener: OrderlyListener,
        *,
        model: MessageModel,
        offsets: OffsetStore,
        dead_letter: DeadLetterFn,
        lock: LockFn,
        restore: Callable[[StoredMessage], StoredMessage],
        batch_size: int,
        max_reconsume_times: int,
        suspend_ms: int,
        executor: ThreadPoolExecutor,
        stats: ConsumerStats | None = None,
    ) -> None:
        self._listener = listener
        self._is_async = is_async_callable(listener)
        self._model = model
        self._offsets = offsets
        self._dead_letter = dead_letter
        self._lock = lock
        self._restore = restore
        self._batch_size = batch_size
        self._max = max_reconsume_times
        self._suspend_ms = suspend_ms
        self._executor = executor
        self._running: dict[ProcessQueue, asyncio.Task[None]] = {}
        self.stats = stats or ConsumerStats()

    def submit(self, messages: object, pq: ProcessQueue) -> None:
        """Messages were added to ``pq``: make sure its consume loop runs."""
        del messages
        if pq not in self._running and pq.is_active():
            task = asyncio.ensure_future(self._run(pq))
            self._running[pq] = task
            task.add_done_callback(lambda _t: self._running.pop(pq, None))

    def cancel(self) -> None:
        for task in self._running.values():
            task.cancel()

    async def _run(self, pq: ProcessQueue) -> None:
        while pq.is_active():
            clustering = self._model is MessageModel.CLUSTERING
            if clustering and not pq.lock_valid and not await self._lock(pq):
                await asyncio.sleep(LOCK_RETRY_S)
                continue
            batch = pq.take(self._batch_size)
            if not batch:
                return
            context = OrderlyContext(pq.queue)
            pq.begin()
            try:
                status = await self._call([self._restore(m) for m in batch], context)
                if pq.dropped:
                    # The lock expired and the queue went to another consumer meanwhile: it
                    # re-reads from the committed offset, so nothing is committed here.
                    return
                if status is OrderlyStatus.SUCCESS:
                    self.stats.consumed += len(batch)
                    self._commit(pq, context)
                    continue
                self.stats.failed += len(batch)
                retrying = not await self._handle_failure(batch, pq)
            finally:
                pq.end()
            if retrying:
                await asyncio.sleep(
                    suspend_s(context.suspend_current_queue_time_ms, self._suspend_ms)
                )

    def _commit(self, pq: ProcessQueue, context: OrderlyContext) -> None:
        offset = pq.commit()
        if offset >= 0 and context.auto_commit:
            self._offsets.update(pq.queue, offset)

    async def _handle_failure(self, batch: list[StoredMessage], pq: ProcessQueue) -> bool:
        """Dead-letter what reached the maximum (drop it in broadcasting); roll the rest back
        for another attempt. True when the whole batch left the queue (no pause needed)."""
        exhausted = [m for m in batch if m.reconsume_times >= self._max]
        returned: set[int] = set()
        for message in exhausted:
            if self._model is MessageModel.BROADCASTING:
                log.warning("broadcast message %s failed and is dropped", message.msg_id)
                self.stats.dropped += 1
                returned.add(message.queue_offset)
            elif await self._dead_letter(message, pq.queue.broker_name):
                returned.add(message.queue_offset)
        retry = [
            replace(m, reconsume_times=m.reconsume_times + 1)
            for m in batch
            if m.queue_offset not in returned
        ]
        self.stats.local_retries += len(retry)
        if not retry:
            self._commit(pq, OrderlyContext(pq.queue))
            return True
        pq.rollback(retry)
        return False

    async def _call(
        self, batch: list[StoredMessage], context: OrderlyContext
    ) -> OrderlyStatus | None:
        result = await call_listener(
            self._listener, self._is_async, self._executor, batch, context, log
        )
        return cast(OrderlyStatus | None, result)
