"""Handing a failed message back to the broker for a later retry.

First CONSUMER_SEND_MSG_BACK to the broker the message came from (the broker decides the
delay and, past the group's maximum, moves it to ``%DLQ%<group>``). If that fails, a normal
send to ``%RETRY%<group>`` carrying the retry state in properties, as RocketMQ's
``DefaultMQPushConsumerImpl.sendMessageBack`` falls back to. The caller re-consumes the
message locally when both fail.

An orderly consumer gives a message up with :meth:`SendBack.dead_letter`: a normal send to
``%RETRY%<group>`` whose reconsume times already reached the maximum, which the broker stores
in ``%DLQ%<group>`` (RocketMQ's ``ConsumeMessageOrderlyService.sendMessageBack``).
"""

from __future__ import annotations

import logging

from reconsume.client.namesrv import RouteCache
from reconsume.client.producer import Producer
from reconsume.client.stats import ConsumerStats
from reconsume.errors import RemotingError
from reconsume.message import properties as props
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import retry_topic
from reconsume.wire.broker_headers import ConsumerSendMsgBackRequestHeader
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import raise_for_response

log = logging.getLogger(__name__)

FALLBACK_DELAY_BASE = 3
"""The fallback send's delay level is ``3 + reconsumeTimes`` (10 s for the first retry)."""


class SendBack:
    def __init__(
        self,
        client: RemotingClient,
        routes: RouteCache,
        producer: Producer,
        group: str,
        *,
        max_reconsume_times: int,
        timeout_s: float = 3.0,
        stats: ConsumerStats | None = None,
    ) -> None:
        self._client = client
        self._routes = routes
        self._producer = producer
        self._group = group
        self._max = max_reconsume_times
        self._timeout_s = timeout_s
        self.stats = stats or ConsumerStats()

    async def __call__(self, message: StoredMessage, broker_name: str, delay_level: int) -> bool:
        """Whether the broker now holds the retry (or dead letter) of ``message``."""
        try:
            await self._send_back(message, broker_name, delay_level)
        except RemotingError as exc:
            log.debug("send-back of %s failed (%s); sending to the retry topic", message, exc)
        else:
            self.stats.sent_back += 1
            return True
        try:
            await self._producer.send(self.fallback_message(message))
        except RemotingError as exc:
            log.warning(
                "retry of message %s could not be stored (%s); consuming it again locally",
                message.uniq_key or message.msg_id,
                exc,
            )
            return False
        self.stats.retry_sends += 1
        return True

    async def dead_letter(self, message: StoredMessage, broker_name: str) -> bool:
        """Give up on a message consumed ``reconsume_times`` (>= the maximum) times: whether
        the broker now holds it as a dead letter. Sent to ``%RETRY%<group>`` with those
        reconsume times, which the broker turns into a dead letter (reason
        MAX_RECONSUME_TIMES); failing that, sent back with delay level -1."""
        retry = self.fallback_message(message, reconsume_time=message.reconsume_times)
        try:
            await self._producer.send(retry)
        except RemotingError as exc:
            log.debug("dead-lettering %s by a send failed (%s); sending it back", message, exc)
        else:
            self.stats.retry_sends += 1
            return True
        try:
            await self._send_back(message, broker_name, -1)
        except RemotingError as exc:
            log.warning(
                "message %s could not be dead-lettered (%s); consuming it again locally",
                message.uniq_key or message.msg_id,
                exc,
            )
            return False
        self.stats.sent_back += 1
        return True

    async def _send_back(self, message: StoredMessage, broker_name: str, delay_level: int) -> None:
        route = await self._routes.get(message.topic)
        address = route.master_of(broker_name) if route is not None else None
        if address is not None and address in self._client.unreachable:
            # a master that cannot be reached may have been replaced (a failover)
            route = await self._routes.get(message.topic, refresh=True)
            address = route.master_of(broker_name) if route is not None else None
        if address is None:
            # The message's own topic route is enough to find its broker; a restored retry
            # message may name a topic the consumer never routed, so ask for the retry topic.
            route = await self._routes.get(retry_topic(self._group))
            address = route.master_of(broker_name) if route is not None else None
        if address is None:
            raise RemotingError(f"no address for broker {broker_name}")
        header = ConsumerSendMsgBackRequestHeader(
            offset=message.commit_log_offset,
            group=self._group,
            delay_level=delay_level,
            origin_msg_id=message.uniq_key or message.msg_id,
            # The topic the listener saw (RocketMQ sends it after resetRetryAndNamespace).
            origin_topic=message.properties.get(props.RETRY_TOPIC) or message.topic,
            max_reconsume_times=self._max,
            broker_name=broker_name,
        )
        request = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
        )
        response = await self._client.invoke(address, request, self._timeout_s)
        raise_for_response(response, f"send-back of {message.msg_id}")

    def fallback_message(
        self, message: StoredMessage, reconsume_time: int | None = None
    ) -> Message:
        """The message sent to ``%RETRY%<group>`` when send-back is not possible. Its
        RECONSUME_TIME (the reconsume times the broker stores, and compares with
        MAX_RECONSUME_TIMES) is ``reconsume_times + 1`` unless given; the producer moves both
        into the send's header."""
        if reconsume_time is None:
            reconsume_time = message.reconsume_times + 1
        properties = dict(message.properties)
        if not properties.get(props.ORIGIN_MESSAGE_ID):
            properties[props.ORIGIN_MESSAGE_ID] = message.uniq_key or message.msg_id
        properties.setdefault(props.RETRY_TOPIC, message.topic)
        properties[props.RECONSUME_TIME] = str(reconsume_time)
        properties[props.MAX_RECONSUME_TIMES] = str(self._max)
        properties.pop(props.TRANSACTION_PREPARED, None)
        properties[props.DELAY_TIME_LEVEL] = str(FALLBACK_DELAY_BASE + message.reconsume_times)
        return Message(retry_topic(self._group), message.body, properties, message.flag)
