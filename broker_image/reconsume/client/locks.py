"""Broker-side queue locks an orderly clustering consumer holds (LOCK_BATCH_MQ): taken before
a queue is read, renewed every 20 s, released when the queue is handed over."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from reconsume.client.broker_api import BrokerApi
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.routes import MessageQueue
from reconsume.errors import RemotingError

log = logging.getLogger(__name__)


class QueueLocks:
    def __init__(
        self,
        api: BrokerApi,
        group: str,
        client_id: str,
        broker_of: Callable[[MessageQueue], Awaitable[str]],
    ) -> None:
        self._api = api
        self._group = group
        self._client_id = client_id
        self._broker_of = broker_of

    async def lock(self, pq: ProcessQueue) -> bool:
        try:
            address = await self._broker_of(pq.queue)
            held = await self._api.lock(address, self._group, self._client_id, [pq.queue])
        except RemotingError as exc:
            log.warning("locking %s failed: %s", pq.queue, exc)
            return False
        return _mark({pq.queue: pq}, held) > 0

    async def renew(self, queues: dict[MessageQueue, ProcessQueue]) -> None:
        by_broker: dict[str, dict[MessageQueue, ProcessQueue]] = {}
        for queue, pq in queues.items():
            by_broker.setdefault(await self._broker_of(queue), {})[queue] = pq
        for address, owned in by_broker.items():
            held = await self._api.lock(address, self._group, self._client_id, owned)
            _mark(owned, held)

    async def unlock(self, queues: Iterable[MessageQueue]) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for queue in queues:
            try:
                by_broker.setdefault(await self._broker_of(queue), []).append(queue)
            except RemotingError:
                continue
        for address, owned in by_broker.items():
            try:
                await self._api.unlock(address, self._group, self._client_id, owned)
            except RemotingError as exc:
                log.warning("unlocking on %s failed: %s", address, exc)


def _mark(queues: dict[MessageQueue, ProcessQueue], held: set[MessageQueue]) -> int:
    now = time.monotonic()
    for queue, pq in queues.items():
        pq.locked = queue in held
        if pq.locked:
            pq.last_lock_s = now
    return len(held & queues.keys())
