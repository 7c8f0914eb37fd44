"""Single broker requests the consumer and the admin client share: queue offsets, consumer
lists, queue locks, heartbeats."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from reconsume.client.routes import MessageQueue
from reconsume.wire.broker_headers import (
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import raise_for_response


class BrokerApi:
    def __init__(self, client: RemotingClient, timeout_s: float = 3.0) -> None:
        self.client = client
        self.timeout_s = timeout_s

    async def call(
        self, address: str, code: int, fields: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, fields, body)
        return await self.client.invoke(address, request, self.timeout_s)

    async def checked(
        self,
        address: str,
        code: int,
        fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        what: str,
    ) -> RemotingCommand:
        response = await self.call(address, code, fields, body)
        raise_for_response(response, what)
        return response

    async def runtime_info(self, address: str) -> dict[str, str]:
        """The broker's GET_BROKER_RUNTIME_INFO table (RocketMQ's ``brokerStatus``)."""
        response = await self.checked(
            address, RequestCode.GET_BROKER_RUNTIME_INFO, what=f"runtime info of {address}"
        )
        table = json.loads(response.body or b"{}").get("table") or {}
        return {str(key): str(value) for key, value in table.items()}

    # ------------------------------------------------------------------ queue offsets
    async def max_offset(self, address: str, queue: MessageQueue) -> int:
        header = GetMaxOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        response = await self.checked(
            address, RequestCode.GET_MAX_OFFSET, header.to_ext_fields(), what=f"max of {queue}"
        )
        return GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def min_offset(self, address: str, queue: MessageQueue) -> int:
        header = GetMinOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        response = await self.checked(
            address, RequestCode.GET_MIN_OFFSET, header.to_ext_fields(), what=f"min of {queue}"
        )
        return GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(self, address: str, queue: MessageQueue, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(
            topic=queue.topic, queue_id=queue.queue_id, timestamp=timestamp_ms
        )
        response = await self.checked(
            address,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            header.to_ext_fields(),
            what=f"offset of {queue} at {timestamp_ms}",
        )
        return SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    # ------------------------------------------------------------------ clients
    async def consumer_ids(self, address: str, group: str) -> list[str]:
        """The client ids of the group's consumers connected to this broker ([] when none)."""
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self.call(
            address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields()
        )
        if response.code == ResponseCode.SYSTEM_ERROR and not response.body:
            return []  # the broker's "no consumer for this group"
        raise_for_response(response, f"consumers of {group}")
        document = json.loads(response.body)
        return sorted(str(cid) for cid in document.get("consumerIdList") or [])

    async def heartbeat(self, address: str, body: dict[str, Any]) -> None:
        await self.checked(
            address, RequestCode.HEART_BEAT, None, json.dumps(body).encode(), what="heartbeat"
        )

    async def unregister(
        self,
        address: str,
        client_id: str,
        *,
        consumer_group: str | None = None,
        producer_group: str | None = None,
    ) -> None:
        header = UnregisterClientRequestHeader(
            client_id=client_id, consumer_group=consumer_group, producer_group=producer_group
        )
        await self.checked(
            address, RequestCode.UNREGISTER_CLIENT, header.to_ext_fields(), what="unregister"
        )

    async def lock(
        self, address: str, group: str, client_id: str, queues: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        """Lock (or renew) queues for orderly consumption; the queues now held."""
        body = _lock_body(group, client_id, queues)
        response = await self.checked(
            address, RequestCode.LOCK_BATCH_MQ, None, body, what=f"lock for {group}"
        )
        held = json.loads(response.body).get("lockOKMQSet") or []
        return {MessageQueue.from_dict(entry) for entry in held}

    async def unlock(
        self, address: str, group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> None:
        body = _lock_body(group, client_id, queues)
        await self.checked(
            address, RequestCode.UNLOCK_BATCH_MQ, None, body, what=f"unlock for {group}"
        )


def _lock_body(group: str, client_id: str, queues: Iterable[MessageQueue]) -> bytes:
    document = {
        "consumerGroup": group,
        "clientId": client_id,
        "onlyThisBroker": False,
        "mqSet": [queue.to_dict() for queue in queues],
    }
    return json.dumps(document).encode()
