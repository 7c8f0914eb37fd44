"""Who is connected: consumer groups with their channels and subscriptions, producer groups.

The state RocketMQ's ``ConsumerManager``/``ConsumerGroupInfo`` and ``ProducerManager`` keep.
A heartbeat registers a client's connection in each group it names; the connection closing
(or staying silent past the idle limit) removes it. When a consumer group's membership or
subscriptions change, every connection still in the group is sent NOTIFY_CONSUMER_IDS_CHANGED
(oneway) so the clients rebalance at once instead of at their next 20 s rebalance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconsume.errors import InvalidArgumentError, RemotingError
from reconsume.message.tags import java_string_hash
from reconsume.wire.broker_headers import NotifyConsumerIdsChangedRequestHeader
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

SUB_ALL = "*"
TAG_EXPRESSION = "TAG"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's subscription to one topic, as the broker filters by it."""

    topic: str
    expression: str
    tag_codes: frozenset[int] | None
    """Tag codes a message must have; None: every message."""
    sub_version: int = 0
    expression_type: str = TAG_EXPRESSION

    @property
    def is_tag_filter(self) -> bool:
        return self.expression_type == TAG_EXPRESSION


def parse_subscription(
    topic: str, expression: str | None, expression_type: str | None = None, sub_version: int = 0
) -> Subscription:
    """RocketMQ's ``FilterAPI.build`` for tag expressions: ``*`` (or nothing) takes every
    message, ``a || b`` the messages tagged a or b (compared by tag hash, as the consume queue
    stores it). Another expression type (SQL92) is kept as given, not a tag filter: pulls by
    it are refused."""
    kind = (expression_type or TAG_EXPRESSION).upper()
    if kind != TAG_EXPRESSION:
        return Subscription(topic, expression or "", None, sub_version, kind)
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(topic, SUB_ALL, None, sub_version)
    tags = [tag.strip() for tag in text.split("||")]
    codes = frozenset(java_string_hash(tag) for tag in tags if tag)
    return Subscription(topic, text, codes or None, sub_version)


def subscription_from_json(data: Mapping[str, Any]) -> Subscription:
    """A heartbeat's ``SubscriptionData``; its ``codeSet`` is used when the client sent one."""
    topic = data.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError("subscriptionData without a topic")
    try:
        version = int(data.get("subVersion", 0))
    except (TypeError, ValueError):
        version = 0
    parsed = parse_subscription(
        topic,
        str(data.get("subString") or SUB_ALL),
        str(data.get("expressionType") or TAG_EXPRESSION),
        version,
    )
    codes = data.get("codeSet")
    if parsed.is_tag_filter and parsed.tag_codes is not None and isinstance(codes, list) and codes:
        try:
            return Subscription(
                topic, parsed.expression, frozenset(int(c) for c in codes), parsed.sub_version
            )
        except (TypeError, ValueError):
            return parsed
    return parsed


@dataclass(slots=True)
class ClientChannel:
    """One client connection in a group."""

    connection: Connection
    client_id: str
    language: int
    version: int
    last_update_s: float


@dataclass(slots=True)
class ConsumerGroup:
    name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Connection, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [channel.client_id for channel in self.channels.values()]


class ConsumerRegistry:
    """Consumer and producer groups of the connected clients."""

    def __init__(self, notify_enabled: Callable[[str], bool]) -> None:
        self._notify_enabled = notify_enabled
        self.consumers: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[Connection, ClientChannel]] = {}

    def group(self, name: str) -> ConsumerGroup | None:
        return self.consumers.get(name)

    def subscription(self, group: str, topic: str) -> Subscription | None:
        info = self.consumers.get(group)
        return None if info is None else info.subscriptions.get(topic)

    # ------------------------------------------------------------------ consumers
    def register_consumer(
        self,
        group: str,
        channel: ClientChannel,
        *,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: Iterable[Subscription],
    ) -> bool:
        """Add or refresh ``channel`` in ``group``; True (and the group notified) if the
        group's members or subscribed topics changed."""
        info = self.consumers.get(group)
        if info is None:
            info = ConsumerGroup(group, consume_type, message_model, consume_from_where)
            self.consumers[group] = info
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        members_changed = self._update_channel(info, channel)
        topics_changed = _update_subscriptions(info, list(subscriptions))
        if members_changed or topics_changed:
            log.info("consumer group %s changed: %s", group, info.client_ids())
            self._notify(info)
        return members_changed or topics_changed

    @staticmethod
    def _update_channel(info: ConsumerGroup, channel: ClientChannel) -> bool:
        old = info.channels.get(channel.connection)
        if old is None:
            info.channels[channel.connection] = channel
            return True
        if old.client_id != channel.client_id:
            info.channels[channel.connection] = channel
        else:
            old.last_update_s = channel.last_update_s
        return False

    def unregister_consumer(self, group: str, connection: Connection) -> None:
        info = self.consumers.get(group)
        if info is None:
            return
        info.channels.pop(connection, None)
        if not info.channels:
            del self.consumers[group]
        self._notify(info)

    # ------------------------------------------------------------------ producers
    def register_producer(self, group: str, channel: ClientChannel) -> None:
        channels = self.producers.setdefault(group, {})
        old = channels.get(channel.connection)
        if old is None or old.client_id != channel.client_id:
            channels[channel.connection] = channel
        else:
            old.last_update_s = channel.last_update_s

    def unregister_producer(self, group: str, connection: Connection) -> None:
        channels = self.producers.get(group)
        if channels is not None:
            channels.pop(connection, None)
            if not channels:
                del self.producers[group]

    # ------------------------------------------------------------------ connections
    def connection_closed(self, connection: Connection) -> None:
        """Forget ``connection`` everywhere; groups that lost a member are notified."""
        for name in list(self.producers):
            self.unregister_producer(name, connection)
        for name, info in list(self.consumers.items()):
            if info.channels.pop(connection, None) is None:
                continue
            if not info.channels:
                del self.consumers[name]
            log.info("consumer %s left group %s (connection closed)", connection.peer, name)
            self._send_notify(info)  # RocketMQ notifies on close whatever the group's setting

    def idle_connections(self, now_s: float, max_idle_s: float) -> set[Connection]:
        """Connections whose last heartbeat in any group is older than ``max_idle_s``."""
        idle: set[Connection] = set()
        groups = [*(g.channels for g in self.consumers.values()), *self.producers.values()]
        for channels in groups:
            for connection, channel in channels.items():
                if now_s - channel.last_update_s > max_idle_s:
                    idle.add(connection)
        return idle

    # ------------------------------------------------------------------ notification
    def _notify(self, info: ConsumerGroup) -> None:
        if self._notify_enabled(info.name):
            self._send_notify(info)

    @staticmethod
    def _send_notify(info: ConsumerGroup) -> None:
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group=info.name)
        for connection in list(info.channels):
            request = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header.to_ext_fields(), oneway=True
            )
            try:
                connection.send(request)
            except RemotingError as exc:
                log.debug("cannot notify %s of group %s: %s", connection.peer, info.name, exc)


def _update_subscriptions(info: ConsumerGroup, subscriptions: list[Subscription]) -> bool:
    """``ConsumerGroupInfo.updateSubscription``: new topics and dropped topics count as a
    change; a newer version of a known topic's subscription replaces it silently."""
    changed = False
    for sub in subscriptions:
        old = info.subscriptions.get(sub.topic)
        if old is None:
            info.subscriptions[sub.topic] = sub
            changed = True
        elif sub.sub_version > old.sub_version:
            info.subscriptions[sub.topic] = sub
    topics = {sub.topic for sub in subscriptions}
    for topic in [t for t in info.subscriptions if t not in topics]:
        del info.subscriptions[topic]
        changed = True
    return changed
