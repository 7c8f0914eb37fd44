"""Admin questions about consumption: GET_CONSUME_STATS, QUERY_TOPIC_CONSUME_BY_WHO and
GET_CONSUMER_CONNECTION_LIST (RocketMQ's ``AdminBrokerProcessor``), which ``mqadmin
consumerProgress``, ``topicList -c``, ``queryMsgById`` and ``consumerConnection`` ask.

A consumer offset key is ``topic@group`` (:func:`reconsume.store.tables.consumer_offset_key`);
topics and groups cannot contain ``@``.
"""

from __future__ import annotations

import json
from typing import Any

from reconsume.broker.consumers import Subscription
from reconsume.broker.context import BrokerContext
from reconsume.broker.runtime_info import Throughput
from reconsume.message.decode import peek_routing
from reconsume.store import MessageStore
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.broker_headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from reconsume.wire.codes import LanguageCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def consume_stats_json(rows: list[tuple[dict[str, Any], dict[str, int]]], tps: float) -> str:
    """RocketMQ's ``ConsumeStats`` as fastjson writes it: ``offsetTable`` is a map whose keys
    are ``MessageQueue`` objects, written as JSON objects (not standard JSON; fastjson, which
    every RocketMQ 4.x tool decodes it with, reads it back)."""
    table = ",".join(f"{_compact(queue)}:{_compact(offsets)}" for queue, offsets in rows)
    return f'{{"consumeTps":{float(tps)!r},"offsetTable":{{{table}}}}}'


def offset_owners(store: MessageStore) -> list[tuple[str, str]]:
    """(topic, group) of every consumer offset key."""
    keys = store.consumer_offsets.keys()
    pairs = (key.split("@") for key in keys)
    return [(parts[0], parts[1]) for parts in pairs if len(parts) == 2]


def store_time_at(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    """Store time (ms) of the message at consume-queue ``offset``; 0 when it is gone."""
    entries = store.queue_entries(topic, queue_id, offset, 1)
    if not entries:
        return 0
    record = store.read_message(entries[0][0])
    return 0 if record is None else peek_routing(record, 0)[3]


def subscription_data(subscription: Subscription) -> dict[str, Any]:
    """RocketMQ's ``SubscriptionData`` JSON."""
    tags: list[str] = []
    if subscription.is_tag_filter and subscription.tag_codes is not None:
        tags = sorted({tag.strip() for tag in subscription.expression.split("||") if tag.strip()})
    return {
        "classFilterMode": False,
        "codeSet": sorted(subscription.tag_codes or ()),
        "expressionType": subscription.expression_type,
        "subString": subscription.expression,
        "subVersion": subscription.sub_version,
        "tagsSet": tags,
        "topic": subscription.topic,
    }


class AdminStatsProcessor:
    def __init__(self, context: BrokerContext, throughput: Throughput) -> None:
        self.context = context
        self.throughput = throughput

    def _topics_of_group(self, group: str) -> list[str]:
        """Topics the group has committed offsets for (``whichTopicByConsumer``)."""
        return sorted({t for t, g in offset_owners(self.context.store) if g == group})

    def consume_stats(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """Per readable queue of each topic: the broker's max offset, the group's committed
        offset (0 when none) and the store time of the last message it consumed (0 when
        none). An online group's stats leave out topics it does not subscribe to."""
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        group = header.consumer_group
        context = self.context
        store = context.store
        topics = [header.topic] if header.topic else self._topics_of_group(group)
        online = context.consumers.group(group)
        rows: list[tuple[dict[str, Any], dict[str, int]]] = []
        tps = 0.0
        for topic in topics:
            config = context.topic(topic)
            if config is None:
                continue
            if online is not None and online.subscriptions and topic not in online.subscriptions:
                continue
            key = consumer_offset_key(topic, group)
            for queue_id in range(config.read_queue_nums):
                consumer_offset = max(0, store.consumer_offsets.get(key, queue_id) or 0)
                last = 0
                if consumer_offset > 0:
                    last = store_time_at(store, topic, queue_id, consumer_offset - 1)
                queue = {
                    "brokerName": context.settings.broker_name,
                    "queueId": queue_id,
                    "topic": topic,
                }
                offsets = {
                    "brokerOffset": max(0, store.max_offset(topic, queue_id)),
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": last,
                }
                rows.append((queue, offsets))
            tps += self.throughput.pulled_tps(topic, group)
        return request.respond(body=consume_stats_json(rows, tps).encode())

    def consumed_by(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """``GroupList``: groups online with a subscription to the topic, and groups with
        committed offsets in it."""
        header = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields)
        groups = {
            name
            for name, info in self.context.consumers.consumers.items()
            if header.topic in info.subscriptions
        }
        groups.update(g for t, g in offset_owners(self.context.store) if t == header.topic)
        return request.respond(body=_compact({"groupList": sorted(groups)}).encode())

    def connections(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """``ConsumerConnection``: the group's connected clients and subscriptions;
        CONSUMER_NOT_ONLINE when none is connected."""
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        info = self.context.consumers.group(header.consumer_group)
        if info is None or not info.channels:
            return request.respond(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{header.consumer_group}] not online",
            )
        clients = [
            {
                "clientAddr": channel.connection.peer,
                "clientId": channel.client_id,
                "language": _language(channel.language),
                "version": channel.version,
            }
            for channel in info.channels.values()
        ]
        body = {
            "connectionSet": sorted(clients, key=lambda c: (c["clientId"], c["clientAddr"])),
            "consumeFromWhere": info.consume_from_where or None,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {
                topic: subscription_data(sub) for topic, sub in sorted(info.subscriptions.items())
            },
        }
        return request.respond(body=_compact(body).encode())


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return LanguageCode.OTHER.name
