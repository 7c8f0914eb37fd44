"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (RocketMQ's ``SendMessageProcessor``).

Checks, in RocketMQ's order: topic name, topics nobody may send to, the topic (created from
its template when unknown and allowed), the queue id; then a send to ``%RETRY%<group>`` whose
``reconsumeTimes`` reached the group's maximum goes to ``%DLQ%<group>`` (marked as a
dead letter). A message with a delay level is stored in the schedule topic, one with a timer
property (TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS) due in the future in the timer
topic (:func:`~reconsume.engine.timer_message.route_delayed`). The message is appended to the store,
held pulls of its queue (or the schedule worker of its level) are woken, and under Sync
flush the answer waits (without blocking the event loop) for the fsync that covers it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection
from typing import NamedTuple

from reconsume.broker.context import BrokerContext
from reconsume.engine.retry import (
    DLQ_QUEUE_NUMS,
    max_reconsume_times,
    past_max_reconsume_times,
)
from reconsume.engine.timer_message import (
    TIMER_PROPERTIES,
    asks_for_delay,
    is_timer_message,
    route_delayed,
)
from reconsume.errors import InvalidArgumentError, StoreError
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.batch import BatchPart, split_batch
from reconsume.message.configs import PERM_READ_WRITE, TopicConfig, is_writable
from reconsume.message.ids import offset_msg_id
from reconsume.message.names import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    dead_letter_topic,
    group_of,
    is_retry_topic,
    validate_topic,
)
from reconsume.message.sysflag import MULTI_TAGS, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from reconsume.store import PutRequest
from reconsume.wire.broker_headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

REGION_ID = "DefaultRegion"
"""What RocketMQ brokers answer in MSG_REGION by default."""
_NOT_SENDABLE = frozenset(
    {
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
_DECODE_IF = tuple(
    name + props.NAME_VALUE_SEPARATOR
    for name in (
        props.DELAY_TIME_LEVEL,
        props.TRANSACTION_PREPARED,
        props.CLUSTER,
        *TIMER_PROPERTIES,
    )
)
"""A send whose properties string holds none of these names needs no decoding: nothing in it
routes, refuses or is replaced (a false match, inside another name, only costs the decoding)."""
_UNKNOWN_HOST = HostAddress(b"\x00\x00\x00\x00", 0)
_BORN_HOST = "send.born_host"
"""Connection attribute: the peer's address as records store it."""


class _Refused(Exception):
    """A send refused with a response code (control flow inside this module only)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class _Batch(NamedTuple):
    """A batch to append (:meth:`MessageStore.append_parts`): its messages as they came and
    what they share."""

    topic: str
    queue_id: int
    parts: list[BatchPart]
    properties: str
    """The batch's own properties, which follow each message's."""
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes
    reconsume_times: int


SendHeader = SendMessageRequestHeader | SendMessageRequestHeaderV2
"""The header of a send: V2 is V1 under one-letter wire names, with the same attributes, so
the processor reads either as it came (no V2 → V1 copy per message)."""


def parse_send_header(request: RemotingCommand) -> SendHeader:
    """The header of any send request (V2 and batch requests use one-letter names)."""
    ext = request.ext_fields
    if request.code == RequestCode.SEND_MESSAGE or ("b" not in ext and "topic" in ext):
        return SendMessageRequestHeader.from_ext_fields(ext)
    return SendMessageRequestHeaderV2.from_ext_fields(ext)


class SendProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self._cluster_entry = props.encode_properties(
            {props.CLUSTER: context.settings.cluster_name}
        )

    def send(self, request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        """The response; None when the write counts as stored only once fsynced (Sync flush)
        or acknowledged by the replicas (Sync replication): the answer is sent by whatever
        releases it (:meth:`BrokerContext.answer_when_stored`), no task per send."""
        header = parse_send_header(request)
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch
        try:
            topic, queue_id, config = self._check(header)
            put = self._build(header, request.body, topic, queue_id, config, connection, batch)
        except _Refused as refused:
            return _respond(request, refused.code, refused.remark)
        return self._store(request, connection, put, queue_id)

    # ------------------------------------------------------------------ checks
    def _check(self, header: SendHeader) -> tuple[str, int, TopicConfig]:
        topic = header.topic
        try:
            validate_topic(topic)
        except InvalidArgumentError as exc:
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}") from None
        if topic in _NOT_SENDABLE:
            raise _Refused(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.context.create_topic_for_send(
            topic, header.default_topic, header.default_topic_queue_nums
        )
        if config is None and is_retry_topic(topic):
            config = self.context.ensure_topic(topic, 1, PERM_READ_WRITE)
        if config is None:
            raise _Refused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not is_writable(config.perm):
            raise _Refused(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        queue_id = header.queue_id
        if queue_id >= config.queue_nums:
            raise _Refused(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {topic} has "
                f"{config.write_queue_nums} write and {config.read_queue_nums} read queues",
            )
        if queue_id < 0:
            if config.write_queue_nums <= 0:
                raise _Refused(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] has no write queue")
            queue_id = random.randrange(99_999_999) % config.write_queue_nums
        if is_retry_topic(topic):
            return self._retry_or_dead_letter(header, topic, queue_id, config)
        return topic, queue_id, config

    def _retry_or_dead_letter(
        self, header: SendHeader, topic: str, queue_id: int, config: TopicConfig
    ) -> tuple[str, int, TopicConfig]:
        """``handleRetryAndDLQ``: a retry message past its group's maximum reconsume times is
        a dead letter."""
        group = group_of(topic) or ""
        group_config = self.context.find_group(group)
        if group_config is None:
            raise _Refused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        limit = max_reconsume_times(group_config.retry_max_times, header.max_reconsume_times)
        if not past_max_reconsume_times(header.reconsume_times or 0, limit):
            return topic, queue_id, config
        dlq = dead_letter_topic(group)
        dlq_config = self.context.ensure_topic(dlq, DLQ_QUEUE_NUMS, PERM_READ_WRITE)
        return dlq, random.randrange(99_999_999) % DLQ_QUEUE_NUMS, dlq_config

    # ------------------------------------------------------------------ building
    def _build(
        self,
        header: SendHeader,
        body: bytes,
        topic: str,
        queue_id: int,
        config: TopicConfig,
        connection: Connection,
        batch: bool,
    ) -> PutRequest | _Batch:
        sys_flag = header.sys_flag | (MULTI_TAGS if config.topic_filter_type == "MULTI_TAG" else 0)
        if sys_flag & TRANSACTION_MASK != TRANSACTION_NOT_TYPE:
            raise _Refused(ResponseCode.NO_PERMISSION, self._no_transactions())
        raw = header.properties or ""
        properties: dict[str, str] = {}
        if not batch and topic == header.topic and not any(name in raw for name in _DECODE_IF):
            # Nothing to look at or change but the cluster name: append it to the string as
            # sent (what decoding and re-encoding would produce, minus that work).
            if raw and raw[-1] != props.PROPERTY_SEPARATOR:
                raw += props.PROPERTY_SEPARATOR
            encoded = raw + self._cluster_entry
        else:
            properties = props.decode_properties(raw)
            encoded, topic, queue_id = self._decoded(properties, header, topic, queue_id, batch)
        max_bytes = self.context.store.settings.max_message_bytes
        if len(body) > max_bytes:
            raise _Refused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message is illegal: body of {len(body)} bytes exceeds the limit of "
                f"{max_bytes} bytes",
            )
        born_host = _born_host(connection)
        reconsume_times = header.reconsume_times or 0
        if not batch:
            return PutRequest(
                topic=topic,
                queue_id=queue_id,
                body=body,
                properties=encoded,
                flag=header.flag,
                sys_flag=sys_flag,
                born_timestamp_ms=header.born_timestamp,
                born_host=born_host,
                reconsume_times=reconsume_times,
            )

        if int(properties.get(props.DELAY_TIME_LEVEL, "0") or 0) > 0 or is_timer_message(
            properties
        ):
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, "a batch message cannot be delayed")
        try:
            parts = split_batch(body)
        except InvalidArgumentError as exc:
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}") from None
        return _Batch(topic, queue_id, parts, encoded, sys_flag, header.born_timestamp, born_host,
                      reconsume_times)  # fmt: skip

    def _decoded(
        self, properties: dict[str, str], header: SendHeader, topic: str, queue_id: int, batch: bool
    ) -> tuple[str, str, int]:
        """The stored properties, topic and queue of a message whose properties need a look:
        a transaction is refused, a dead letter marked, a delayed message routed to the
        schedule or timer topic."""
        if properties.get(props.TRANSACTION_PREPARED, "").lower() == "true":
            raise _Refused(ResponseCode.NO_PERMISSION, self._no_transactions())
        properties[props.CLUSTER] = self.context.settings.cluster_name
        if topic != header.topic:  # a dead letter: delivered as is, never delayed
            self.context.dead_letter_sent(properties, header.topic)
        elif not batch and asks_for_delay(properties):
            # A delayed message waits in the schedule or timer topic (the response keeps its
            # queue); one past the longest timer delay or with a garbled time is illegal.
            try:
                topic, queue_id = route_delayed(
                    properties,
                    topic,
                    queue_id,
                    self.context.delays,
                    now_ms=time.time_ns() // 1_000_000,
                    max_delay_ms=self.context.settings.timer_max_delay_s * 1000,
                )
            except InvalidArgumentError as exc:
                raise _Refused(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
        return props.encode_properties(properties), topic, queue_id

    def _no_transactions(self) -> str:
        return f"the broker[{self.context.address}] sending transaction message is forbidden"

    # ------------------------------------------------------------------ storing
    def _store(
        self,
        request: RemotingCommand,
        connection: Connection,
        put: PutRequest | _Batch,
        queue_id: int,
    ) -> RemotingCommand | None:
        store = self.context.store
        context = self.context
        topic = put.topic
        codes: Callable[[], Collection[int]]
        try:
            if isinstance(put, _Batch):
                stored = store.append_parts(
                    topic, put.queue_id, put.parts, put.properties, sys_flag=put.sys_flag,
                    born_timestamp_ms=put.born_timestamp_ms, born_host=put.born_host,
                    reconsume_times=put.reconsume_times,
                )  # fmt: skip
                offsets, first, last = stored.offsets, stored.queue_offset, stored.last()
                codes = stored.tag_codes.copy
                body_bytes = sum(len(part[1]) for part in put.parts)
            else:
                last = store.append(put)
                offsets, first = [last.commit_log_offset], last.queue_offset
                body_bytes = len(put.body)
                single = put  # narrowed, for the lambda
                codes = lambda: (context.tags_code(topic, single.properties, 0),)  # noqa: E731
        except InvalidArgumentError as exc:
            return _respond(request, ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}")
        except StoreError as exc:
            return _respond(request, ResponseCode.SERVICE_NOT_AVAILABLE, str(exc))
        context.log_grew()
        context.stats.stored(topic, len(offsets), body_bytes)
        context.waiters.appended(
            last.end_offset,
            context.read_limit,
            topic,
            queue_id,
            store.max_offset(topic, queue_id),
            codes,
        )
        if topic == SCHEDULE_TOPIC:
            context.schedule_appended(put.queue_id)  # the level's queue (the answer keeps its own)
        elif topic == TIMER_TOPIC:
            context.timer_appended()
        if context.waits_for_storage:
            context.reply_when_stored(
                last,
                connection,
                request,
                lambda code: self._answer(request, offsets, first, queue_id, code),
            )
            return None
        return self._answer(request, offsets, first, queue_id, ResponseCode.SUCCESS)

    def _answer(
        self, request: RemotingCommand, offsets: list[int], first: int, queue_id: int, code: int
    ) -> RemotingCommand:
        """SEND_OK's answer: the records' offset ids, the queue and the first's queue offset."""
        host = self.context.store_host
        ids = ",".join(offset_msg_id(host, offset) for offset in offsets)
        header = SendMessageResponseHeader(msg_id=ids, queue_id=queue_id, queue_offset=first)
        ext = header.to_ext_fields()
        ext[props.MSG_REGION] = REGION_ID
        ext[props.TRACE_SWITCH] = "true"
        return request.respond(code, None, ext)


def _born_host(connection: Connection) -> bytes:
    """The peer's packed address, parsed once per connection."""
    packed: bytes | None = connection.attributes.get(_BORN_HOST)
    if packed is None:
        try:
            packed = HostAddress.parse(connection.peer).packed()
        except InvalidArgumentError:
            packed = _UNKNOWN_HOST.packed()
        connection.attributes[_BORN_HOST] = packed
    return packed


def _respond(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    ext = {props.MSG_REGION: REGION_ID, props.TRACE_SWITCH: "true"}
    return request.respond(code, remark, ext)
