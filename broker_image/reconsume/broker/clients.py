"""Client requests: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ and
UNLOCK_BATCH_MQ (RocketMQ's ``ClientManageProcessor``, ``ConsumerManageProcessor`` and the lock
requests of ``AdminBrokerProcessor``)."""

from __future__ import annotations

import json
import time
from typing import Any

from reconsume.broker.consumers import ClientChannel, Subscription, subscription_from_json
from reconsume.broker.context import BrokerContext
from reconsume.broker.locks import QueueKey
from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import PERM_READ_WRITE
from reconsume.message.names import retry_topic, validate_group
from reconsume.wire.broker_headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection


def json_body(request: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        document = json.loads(request.body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{what} body is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidArgumentError(f"{what} body is not a JSON object")
    return document


def json_list(document: dict[str, Any], name: str) -> list[Any]:
    value = document.get(name) or []
    if not isinstance(value, list):
        raise InvalidArgumentError(f"{name} must be a list")
    return value


def lock_body(request: RemotingCommand, what: str) -> tuple[str, str, list[QueueKey]]:
    """The group, client id and queues of a LockBatchRequestBody or UnlockBatchRequestBody."""
    document = json_body(request, what)
    group = document.get("consumerGroup")
    client_id = document.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise InvalidArgumentError(f"{what} needs consumerGroup and clientId")
    return group, client_id, [QueueKey.from_dict(mq) for mq in json_list(document, "mqSet")]


class ClientProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context

    def heartbeat(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """Register the client's consumer and producer groups on this connection; a consumer
        group's config and retry topic are created as RocketMQ does."""
        document = json_body(request, "HeartbeatData")
        client_id = str(document.get("clientID") or "")
        if not client_id:
            raise InvalidArgumentError("HeartbeatData has no clientID")
        connection.attributes["clientId"] = client_id
        now = time.monotonic()
        context = self.context
        for data in json_list(document, "consumerDataSet"):
            if not isinstance(data, dict):
                raise InvalidArgumentError("consumerDataSet holds a non-object")
            group = validate_group(str(data.get("groupName") or ""))
            subscriptions: list[Subscription] = [
                subscription_from_json(sub) for sub in json_list(data, "subscriptionDataSet")
            ]
            config = context.find_group(group)
            if config is not None:
                context.ensure_topic(retry_topic(group), config.retry_queue_nums, PERM_READ_WRITE)
            context.consumers.register_consumer(
                group,
                ClientChannel(connection, client_id, request.language, request.version, now),
                consume_type=str(data.get("consumeType") or "CONSUME_PASSIVELY"),
                message_model=str(data.get("messageModel") or "CLUSTERING"),
                consume_from_where=str(data.get("consumeFromWhere") or ""),
                subscriptions=subscriptions,
            )
        for data in json_list(document, "producerDataSet"):
            if not isinstance(data, dict) or not data.get("groupName"):
                raise InvalidArgumentError("producerDataSet holds an entry without groupName")
            context.consumers.register_producer(
                str(data["groupName"]),
                ClientChannel(connection, client_id, request.language, request.version, now),
            )
        return request.respond()

    def unregister(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if header.producer_group:
            self.context.consumers.unregister_producer(header.producer_group, connection)
        if header.consumer_group:
            self.context.consumers.unregister_consumer(header.consumer_group, connection)
        return request.respond()

    def consumer_list(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        group = self.context.consumers.group(header.consumer_group)
        ids = [] if group is None else group.client_ids()
        if not ids:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        return request.respond(body=json.dumps({"consumerIdList": ids}).encode())

    def lock_batch(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """``LockBatchRequestBody`` in, ``LockBatchResponseBody`` (the queues now held) out."""
        group, client_id, queues = lock_body(request, "LockBatchRequestBody")
        held = self.context.locks.try_lock(group, queues, client_id)
        body = {"lockOKMQSet": [queue.to_dict() for queue in sorted(held)]}
        return request.respond(body=json.dumps(body).encode())

    def unlock_batch(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        group, client_id, queues = lock_body(request, "UnlockBatchRequestBody")
        self.context.locks.unlock(group, queues, client_id)
        return request.respond()
