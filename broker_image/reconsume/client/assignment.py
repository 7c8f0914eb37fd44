"""The queues a push consumer reads right now, each with its process queue and pull loop.

A rebalance hands this table the queues the allocation gives the consumer for one topic; it
starts reading the new ones (from the committed offset, or where ``consumeFromWhere`` says)
and hands over the others: stop pulling, let batches in the listener finish, commit, and —
for orderly consumers — release the broker lock, so the next owner starts where this one
stopped instead of re-reading what was in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from reconsume.client.broker_api import BrokerApi
from reconsume.client.listener import ConsumeFrom, MessageModel
from reconsume.client.locks import QueueLocks
from reconsume.client.offsets import OffsetStore
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.pull import PullLoop
from reconsume.client.routes import MessageQueue
from reconsume.client.settings import ConsumerSettings
from reconsume.client.subscription import Subscription
from reconsume.errors import RemotingError
from reconsume.message.model import StoredMessage
from reconsume.message.names import is_retry_topic
from reconsume.wire.endpoints import RemotingClient

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Who reads the queues, and the consumer's settings every queue is read with."""

    group: str
    client_id: str
    orderly: bool
    consumer: ConsumerSettings

    @property
    def clustering(self) -> bool:
        return self.consumer.model is MessageModel.CLUSTERING


class Assignment:
    def __init__(
        self,
        settings: QueueSettings,
        *,
        client: RemotingClient,
        api: BrokerApi,
        offsets: OffsetStore,
        locks: QueueLocks,
        broker_of: Callable[[MessageQueue], Awaitable[str]],
        submit: Callable[[Sequence[StoredMessage], ProcessQueue], None],
        subscriptions: Mapping[str, Subscription],
    ) -> None:
        self._settings = settings
        self._client = client
        self._api = api
        self._offsets = offsets
        self._locks = locks
        self._broker_of = broker_of
        self._submit = submit
        self._subscriptions = subscriptions
        self.queues: dict[MessageQueue, ProcessQueue] = {}
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}

    @property
    def _locking(self) -> bool:
        return self._settings.orderly and self._settings.clustering

    async def update(self, topic: str, mine: set[MessageQueue]) -> bool:
        """Drop queues of ``topic`` no longer ours, start the new ones; False if some could
        not start (they are tried again at the next rebalance)."""
        leaving = [q for q in self.queues if q.topic == topic and q not in mine]
        await self.hand_over(leaving)
        complete = True
        for queue in sorted(mine - self.queues.keys()):
            if not await self._start(queue):
                complete = False
        return complete

    async def _start(self, queue: MessageQueue) -> bool:
        settings = self._settings
        consumer = settings.consumer
        pq = ProcessQueue(queue, consumer.max_held_per_queue)
        if self._locking and not await self._locks.lock(pq):
            return False
        try:
            offset = await self._start_offset(queue)
        except RemotingError as exc:
            log.warning("cannot find where to start %s: %s", queue, exc)
            return False
        self.queues[queue] = pq
        loop = PullLoop(
            pq,
            self._subscriptions[queue.topic],
            offset,
            group=settings.group,
            client=self._client,
            broker_of=self._broker_of,
            offsets=self._offsets,
            submit=self._submit,
            commit_in_pull=settings.clustering,
            batch_size=consumer.pull_batch_size,
            long_poll_ms=consumer.long_poll_ms,
            timeout_s=consumer.timeout_s,
        )
        self._pulls[queue] = asyncio.ensure_future(loop.run())
        log.info("%s reads %s from offset %d", settings.client_id, queue, offset)
        return True

    async def _start_offset(self, queue: MessageQueue) -> int:
        """RocketMQ's ``computePullFromWhere``."""
        stored = await self._offsets.read(queue)
        if stored >= 0:
            return stored
        consume_from = self._settings.consumer.consume_from
        if consume_from is ConsumeFrom.FIRST_OFFSET or is_retry_topic(queue.topic):
            return 0
        address = await self._broker_of(queue)
        if consume_from is ConsumeFrom.TIMESTAMP:
            timestamp = self._settings.consumer.consume_timestamp_ms
            return await self._api.search_offset(address, queue, timestamp)
        return await self._api.max_offset(address, queue)

    async def stop(self) -> list[MessageQueue]:
        """Stop every queue: no new pulls or batches; wait for running batches (up to the
        hand-over wait). The queues' offsets stay in the offset store for a final commit."""
        queues = list(self.queues)
        await self._quiesce(queues)
        return queues

    async def _quiesce(self, queues: list[MessageQueue]) -> None:
        pqs = [self.queues[q] for q in queues if q in self.queues]
        for pq in pqs:
            pq.paused = True
        tasks = [t for q in queues if (t := self._pulls.pop(q, None)) is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        wait_s = self._settings.consumer.shutdown_wait_s
        await asyncio.gather(*(pq.wait_quiet(wait_s) for pq in pqs))
        for pq in pqs:
            pq.dropped = True

    async def hand_over(self, queues: list[MessageQueue]) -> None:
        """Give queues up: quiesce, commit their offsets, forget them, release locks."""
        if not queues:
            return
        await self._quiesce(queues)
        await self._offsets.persist(queues)
        for queue in queues:
            self.queues.pop(queue, None)
            self._offsets.remove(queue)
            log.info("%s no longer reads %s", self._settings.client_id, queue)
        if self._locking:
            await self._locks.unlock(queues)
