"""Admin requests: topics, subscription groups and looking a message up by commit-log offset
(RocketMQ's ``AdminBrokerProcessor`` and ``QueryMessageProcessor.viewMessageById``).

Unlike RocketMQ, changing a group's ``retryQueueNums`` reshapes its existing retry topic, and
lowering it (or a retry topic's queue counts) never strands stored retries: see
:mod:`reconsume.engine.retry_queues`."""

from __future__ import annotations

import json
import logging

from reconsume.broker.context import BrokerContext
from reconsume.engine.policies import retry_policy
from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import (
    SubscriptionGroupConfig,
    TopicConfig,
    consume_type_value,
    parse_consume_type,
)
from reconsume.message.names import is_system_topic, validate_group, validate_topic
from reconsume.wire.broker_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    ViewMessageRequestHeader,
)
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


class AdminProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context

    # ------------------------------------------------------------------ topics
    def _refuse_topic(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        """RocketMQ's ``TopicValidator`` checks of admin topic requests."""
        try:
            validate_topic(topic)
        except InvalidArgumentError as exc:
            return request.respond(ResponseCode.SYSTEM_ERROR, str(exc))
        if is_system_topic(topic):
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        return None

    async def create_topic(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        refused = self._refuse_topic(request, header.topic)
        if refused is not None:
            return refused
        if header.topic_filter_type not in TOPIC_FILTER_TYPES:
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"topicFilterType {header.topic_filter_type!r} is not one of {TOPIC_FILTER_TYPES}",
            )
        config = TopicConfig(
            topic_name=header.topic,
            read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums,
            perm=header.perm,
            topic_filter_type=header.topic_filter_type,
            topic_sys_flag=header.topic_sys_flag or 0,
            order=header.order,
        )
        # A retry topic keeps queues being removed readable until they are drained.
        self.context.update_topic(config)
        await self.context.topics_registered()  # the route is there when the answer is
        return request.respond()

    def delete_topic(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """Drop the topic's config, consume queues and consumer offsets (its records age out of
        the commit log with retention)."""
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        refused = self._refuse_topic(request, header.topic)
        if refused is not None:
            return refused
        store = self.context.store
        self.context.delete_topic(header.topic)
        store.delete_topic(header.topic)
        prefix = header.topic + "@"
        removed = store.consumer_offsets.remove_where(lambda key: key.startswith(prefix))
        store.acked.remove_where(lambda key: key.startswith(prefix))
        log.info("topic %s deleted with the offsets of %d group(s)", header.topic, removed)
        return request.respond()

    def all_topics(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """``TopicConfigSerializeWrapper``: every topic config and the table's data version."""
        body = {
            "topicConfigTable": {
                name: config.to_dict() for name, config in self.context.store.topics.items()
            },
            "dataVersion": self.context.topic_data_version(),
        }
        return request.respond(body=json.dumps(body).encode())

    # ------------------------------------------------------------------ groups
    async def create_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """Create or replace a subscription group from its ``SubscriptionGroupConfig`` JSON."""
        try:
            document = json.loads(request.body)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"SubscriptionGroupConfig body is not JSON: {exc}"
            )
        if not isinstance(document, dict):
            return request.respond(
                ResponseCode.SYSTEM_ERROR, "SubscriptionGroupConfig body is not a JSON object"
            )
        config = SubscriptionGroupConfig.from_dict(document)
        validate_group(config.group_name)
        try:  # refused here, with the field named, rather than ignored when it is used
            retry_policy(
                config.group_retry_policy,
                self.context.delays,
                self.context.settings.timer_max_delay_s * 1000,
            )
            parse_consume_type(consume_type_value(config.attributes))
        except InvalidArgumentError as exc:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"subscription group {config.group_name}: {exc}"
            )
        self.context.store.groups.put(config.group_name, config)
        log.info("subscription group %s: %s", config.group_name, config.to_dict())
        self.context.group_updated(config)  # the retry topic follows retryQueueNums
        # A resized retry topic is routed when the answer is (no wait when nothing changed).
        await self.context.topics_registered()
        return request.respond()

    def delete_group(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        store = self.context.store
        store.groups.delete(header.group_name)
        if header.remove_offset:
            suffix = "@" + header.group_name
            store.consumer_offsets.remove_where(lambda key: key.endswith(suffix))
            store.acked.remove_where(lambda key: key.endswith(suffix))
        return request.respond()

    def all_groups(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """``SubscriptionGroupWrapper``: every group config and the table's data version."""
        body = {
            "subscriptionGroupTable": {
                name: config.to_dict() for name, config in self.context.store.groups.items()
            },
            "dataVersion": self.context.group_data_version(),
        }
        return request.respond(body=json.dumps(body).encode())

    # ------------------------------------------------------------------ messages
    def view_message(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        """The stored record at the header's commit-log ``offset`` (what an offset message id
        points at), as the response body."""
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        record = self.context.store.read_message(header.offset) if header.offset >= 0 else None
        if record is None:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        return request.respond(body=record)
