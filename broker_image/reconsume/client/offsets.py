"""Where a push consumer keeps its consume offsets.

Clustering consumers share progress through the brokers (RocketMQ's
``RemoteBrokerOffsetStore``): offsets live in memory, are committed to the queue's broker
every few seconds, when a queue moves to another consumer, and at shutdown. Broadcasting
consumers each keep their own progress in a local JSON file (``LocalFileOffsetStore``),
replaced atomically so a crash leaves either the old or the new file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from reconsume.client.namesrv import RouteCache
from reconsume.client.routes import MessageQueue
from reconsume.errors import CodecError, RemotingError
from reconsume.wire.broker_headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import raise_for_response

log = logging.getLogger(__name__)

NO_OFFSET = -1
"""``read`` found no stored offset: the consumer starts where ``consumeFromWhere`` says."""


class OffsetStore(Protocol):
    async def load(self) -> None:
        """Read what is stored locally (nothing for broker-held offsets)."""

    async def read(self, queue: MessageQueue) -> int:
        """The stored offset of ``queue`` (from the broker or file), or NO_OFFSET."""

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Record progress in memory."""

    def current(self, queue: MessageQueue) -> int | None:
        """The in-memory offset, if any."""

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        """Write the in-memory offsets of ``queues`` where they are kept."""

    def remove(self, queue: MessageQueue) -> None:
        """Forget ``queue`` (it moved to another consumer)."""


class BrokerOffsetStore:
    """Offsets committed to each queue's broker (clustering)."""

    def __init__(
        self, client: RemotingClient, routes: RouteCache, group: str, *, timeout_s: float = 3.0
    ) -> None:
        self._client = client
        self._routes = routes
        self._group = group
        self._timeout_s = timeout_s
        self._offsets: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    async def _broker(self, queue: MessageQueue) -> str:
        route = await self._routes.get(queue.topic)
        address = route.reader_of(queue.broker_name) if route is not None else None
        if address is None:
            route = await self._routes.get(queue.topic, refresh=True)
            address = route.reader_of(queue.broker_name) if route is not None else None
        if address is None:
            raise RemotingError(f"no broker address for {queue.broker_name}")
        return address

    async def read(self, queue: MessageQueue) -> int:
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=self._group, topic=queue.topic, queue_id=queue.queue_id
        )
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
        response = await self._client.invoke(await self._broker(queue), request, self._timeout_s)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return NO_OFFSET
        raise_for_response(response, f"consumer offset of {queue}")
        offset = QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset
        self._offsets[queue] = offset
        self._persisted[queue] = offset
        return offset

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        known = self._offsets.get(queue)
        if known is None or not increase_only or offset > known:
            self._offsets[queue] = offset

    def current(self, queue: MessageQueue) -> int | None:
        return self._offsets.get(queue)

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        for queue in list(queues):
            offset = self._offsets.get(queue)
            if offset is None or self._persisted.get(queue) == offset:
                continue
            header = UpdateConsumerOffsetRequestHeader(
                consumer_group=self._group,
                topic=queue.topic,
                queue_id=queue.queue_id,
                commit_offset=offset,
            )
            request = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
            )
            try:
                response = await self._client.invoke(
                    await self._broker(queue), request, self._timeout_s
                )
                raise_for_response(response, f"commit offset of {queue}")
            except RemotingError as exc:
                log.warning("committing offset %d of %s failed: %s", offset, queue, exc)
                continue
            self._persisted[queue] = offset

    def remove(self, queue: MessageQueue) -> None:
        self._offsets.pop(queue, None)
        self._persisted.pop(queue, None)


class LocalOffsetStore:
    """Offsets in ``<directory>/offsets.json`` (broadcasting)."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / "offsets.json"
        self._offsets: dict[MessageQueue, int] = {}

    @property
    def path(self) -> Path:
        return self._path

    async def load(self) -> None:
        try:
            document = json.loads(self._path.read_text())
            entries = document["offsets"]
            self._offsets = {
                MessageQueue.from_dict(entry): int(entry["offset"]) for entry in entries
            }
        except FileNotFoundError:
            self._offsets = {}
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"offset file {self._path} is unreadable: {exc}") from exc

    async def read(self, queue: MessageQueue) -> int:
        return self._offsets.get(queue, NO_OFFSET)

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        known = self._offsets.get(queue)
        if known is None or not increase_only or offset > known:
            self._offsets[queue] = offset

    def current(self, queue: MessageQueue) -> int | None:
        return self._offsets.get(queue)

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        # The file holds every queue this consumer ever read, not only ``queues``.
        del queues
        entries = [
            {**queue.to_dict(), "offset": offset} for queue, offset in sorted(self._offsets.items())
        ]
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        with temporary.open("w") as handle:
            json.dump({"offsets": entries}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self._path)

    def remove(self, queue: MessageQueue) -> None:
        # Broadcasting consumers never hand a queue over; keep its progress on file.
        return None
