"""PULL_MESSAGE with long polling (RocketMQ's ``PullMessageProcessor`` and
``PullRequestHoldService``).

A pull is checked (group, topic, queue, subscription), read from the store with the
subscription's tag filter, and answered with the store's status mapped to a response code. A
pull that finds nothing new and carries the suspend flag is held: it waits for a send to its
queue (see :mod:`reconsume.broker.longpoll`) or for its suspend timeout, then is processed
again and answered. The commit-offset flag stores the request's ``commitOffset`` for the
group, once, when the pull first arrives. A group declared POP (RocketMQ 5 clients only) is
refused (:mod:`reconsume.broker.consume_types`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from reconsume.broker.consume_types import remoting_refusal
from reconsume.broker.consumers import Subscription, parse_subscription
from reconsume.broker.context import BrokerContext
from reconsume.broker.longpoll import HeldPull
from reconsume.message.configs import is_readable
from reconsume.store import GetStatus
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.broker_headers import PullMessageRequestHeader, PullMessageResponseHeader
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
MASTER_ID = 0
MAX_TRANSFER_COUNT = 32
"""Messages one pull returns at most (RocketMQ's ``maxTransferCountOnMessageInMemory``)."""
MAX_TRANSFER_BYTES = 256 * 1024
"""Bytes one pull returns at about most (``maxTransferBytesOnMessageInMemory``)."""
BULK_TRANSFER_COUNT = 1024
BULK_TRANSFER_BYTES = 4 * 1024 * 1024
"""What a bulk pull (header field ``reconsumeBulk``, sent by readers of whole queue ranges such
as the dead-letter jobs) returns at most: a consumer's caps keep one pull's messages within
what its listeners take in one go, a reader turns them into columns; each pull costs the
broker and the reader about as much as 8 messages of 1 KiB, so bigger pulls cost less."""

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE)


class PullProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context

    def pull(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | Awaitable[RemotingCommand | None]:
        """The response, at once unless the pull is held (then an awaitable of it; None when
        the consumer left meanwhile): no task per pull that finds messages."""
        header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        checked = self._check(request, header)
        if isinstance(checked, RemotingCommand):
            return self._counted(checked)
        response = self._read(request, header, checked)
        if header.sys_flag & FLAG_COMMIT_OFFSET:
            self.context.store.consumer_offsets.set(
                consumer_offset_key(header.topic, header.consumer_group),
                header.queue_id,
                header.commit_offset,
            )
        if response.code != ResponseCode.PULL_NOT_FOUND or not header.sys_flag & FLAG_SUSPEND:
            return self._counted(response)
        # Held now, not when the task awaiting the answer first runs: a send handled in
        # between must find this pull to wake it.
        held = self.context.waiters.hold(
            header.topic, header.queue_id, header.queue_offset, checked.tag_codes
        )
        return self._held(request, header, held, connection)

    def _counted(self, response: RemotingCommand) -> RemotingCommand:
        self.context.stats.pulled(response.code)
        return response

    async def _held(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        held: HeldPull,
        connection: Connection,
    ) -> RemotingCommand | None:
        """Wait for a message (or the suspend timeout), then answer the pull again. The
        connection's end completes the pull's own future, so a message's arrival wakes this
        task in the loop's next turn (``asyncio.wait`` over both took a turn more)."""
        woken = held.woken

        def closed(_: object) -> None:
            if not woken.done():
                woken.set_result(None)

        connection.closed.add_done_callback(closed)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0, header.suspend_timeout_millis) / 1000):
                    await woken
        finally:
            connection.closed.remove_done_callback(closed)
            self.context.waiters.release(held)
        if not connection.is_open:
            return None
        # As RocketMQ does on wake-up: process the request again, this time without holding.
        checked = self._check(request, header)
        if isinstance(checked, RemotingCommand):
            return self._counted(checked)
        return self._counted(self._read(request, header, checked))

    def _check(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> Subscription | RemotingCommand:
        """The subscription to filter by, or the response refusing the pull."""
        context = self.context
        group = context.find_group(header.consumer_group)
        if group is None:
            return request.respond(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
            )
        if not group.consume_enable:
            return request.respond(
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {header.consumer_group}",
            )
        refusal = remoting_refusal(group, "pulls")
        if refusal is not None:  # a group 5.x clients consume through pop leases
            return request.respond(ResponseCode.NO_PERMISSION, refusal)
        topic = context.topic(header.topic)
        if topic is None:
            return request.respond(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        if not is_readable(topic.perm):
            return request.respond(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] pulling message is forbidden",
            )
        if not 0 <= header.queue_id < topic.read_queue_nums:
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}]",
            )
        if header.sys_flag & FLAG_SUBSCRIPTION:
            subscription = parse_subscription(
                header.topic, header.subscription, header.expression_type, header.sub_version
            )
        else:
            registered = context.consumers.group(header.consumer_group)
            if registered is None:
                return request.respond(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"
                )
            if not group.consume_broadcast_enable and registered.message_model == "BROADCASTING":
                return request.respond(
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
                )
            found = registered.subscriptions.get(header.topic)
            if found is None:
                return request.respond(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist"
                )
            if found.sub_version < header.sub_version:
                return request.respond(
                    ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
                )
            subscription = found
        if not subscription.is_tag_filter:
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by "
                + subscription.expression_type,
            )
        return subscription

    def _read(
        self, request: RemotingCommand, header: PullMessageRequestHeader, subscription: Subscription
    ) -> RemotingCommand:
        count_cap, bytes_cap = MAX_TRANSFER_COUNT, MAX_TRANSFER_BYTES
        if header.bulk:
            count_cap, bytes_cap = BULK_TRANSFER_COUNT, BULK_TRANSFER_BYTES
        result = self.context.store.get_messages(
            header.topic,
            header.queue_id,
            header.queue_offset,
            max_count=min(max(header.max_msg_nums, 1), count_cap),
            max_bytes=bytes_cap,
            tag_codes=subscription.tag_codes,
            log_limit=self.context.read_limit,
        )
        if result.status in _EMPTY_QUEUE:
            code = ResponseCode.PULL_NOT_FOUND
            if header.queue_offset != 0:
                code = ResponseCode.PULL_OFFSET_MOVED
        else:
            code = _CODES[result.status]
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=MASTER_ID,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        )
        body = b""
        if code == ResponseCode.SUCCESS:
            body = b"".join(result.records)
            self.context.stats.delivered(header.topic, header.consumer_group, len(result.records))
        return request.respond(code, result.status.value, response_header.to_ext_fields(), body)
