"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
over the pop engine (:mod:`.pop`), answered as Apache RocketMQ's proxy answers them.

A receive that finds nothing waits — woken by an append to any of its queues, as a held 4.x
pull is — until its long-polling timeout, then answers MESSAGE_NOT_FOUND. Its stream is: a
status, the messages, then the delivery timestamp (the proxy's order).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from google.protobuf.timestamp_pb2 import Timestamp

from reconsume.broker.consume_types import pop_refusal
from reconsume.broker.consumers import SUB_ALL
from reconsume.broker.context import BrokerContext
from reconsume.broker.messaging.leases import Handle, invisible_ms
from reconsume.broker.messaging.messages import to_protocol
from reconsume.broker.messaging.pop import PopEngine
from reconsume.broker.messaging.status import Refused, status
from reconsume.broker.messaging.times import timestamp
from reconsume.errors import InvalidArgumentError
from reconsume.message.names import validate_group
from reconsume.wire.v2 import definition_pb2 as pb
from reconsume.wire.v2 import service_pb2 as spb

MAX_BATCH = 32
"""The proxy's ``grpcClientConsumerLongPollingBatchSize``: a larger batch is cut to it."""
AUTO_RENEW_INVISIBLE_MS = 60_000
"""A push consumer's first invisible duration (it sends none: ``auto_renew``)."""
MAX_POLL_MS = 30_000
RECHECK_S = 1.0
"""A waiting receive looks again this often: a FIFO queue its lease expiry reopened wakes
no append."""


def tag_filter(expression: pb.FilterExpression) -> frozenset[str] | None:
    """The tags a TAG expression accepts (None: every message)."""
    if expression.type not in (pb.TAG, pb.FILTER_TYPE_UNSPECIFIED):
        raise Refused(pb.ILLEGAL_FILTER_EXPRESSION, "only TAG filter expressions are served")
    text = expression.expression.strip()
    if not text or text == SUB_ALL:
        return None
    tags = frozenset(tag.strip() for tag in text.split("||") if tag.strip())
    if not tags:
        raise Refused(pb.ILLEGAL_FILTER_EXPRESSION, f"{text!r} names no tag")
    return tags


def _now_stamp() -> Timestamp:
    return timestamp(time.time_ns() // 1_000_000)


def _group(name: str) -> str:
    try:
        validate_group(name)
    except InvalidArgumentError as exc:
        raise Refused(pb.ILLEGAL_CONSUMER_GROUP, str(exc)) from exc
    return name


class ConsumeService:
    def __init__(self, context: Callable[[], BrokerContext], engine: PopEngine) -> None:
        self._context = context
        self.engine = engine

    async def receive(
        self, request: spb.ReceiveMessageRequest, client_id: str
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        try:
            found = await self._receive(request, client_id)
        except Refused as refused:
            yield spb.ReceiveMessageResponse(status=refused.status())
        else:
            if not found:
                yield spb.ReceiveMessageResponse(
                    status=status(pb.MESSAGE_NOT_FOUND, "no new message")
                )
            else:
                yield spb.ReceiveMessageResponse(status=status(pb.OK))
                for message in found:
                    yield spb.ReceiveMessageResponse(message=message)
        yield spb.ReceiveMessageResponse(delivery_timestamp=_now_stamp())

    async def _receive(
        self, request: spb.ReceiveMessageRequest, client_id: str
    ) -> list[pb.Message]:
        context = self._context()
        group_name = _group(request.group.name)
        group = context.find_group(group_name)
        if group is None:
            raise Refused(pb.CONSUMER_GROUP_NOT_FOUND, f"group {group_name} does not exist")
        if not group.consume_enable:
            raise Refused(pb.FORBIDDEN, f"group {group_name} may not consume now")
        refusal = pop_refusal(group)
        if refusal is not None:  # a group 4.x consumers commit offsets of
            raise Refused(pb.FORBIDDEN, refusal)
        tags = tag_filter(request.filter_expression)
        batch = min(max(request.batch_size, 1), MAX_BATCH)
        if request.auto_renew:
            invisible = AUTO_RENEW_INVISIBLE_MS
        elif request.HasField("invisible_duration"):
            invisible = invisible_ms(request.invisible_duration.ToMilliseconds())
        else:
            raise Refused(pb.ILLEGAL_INVISIBLE_TIME, "no invisible duration")
        poll_ms = MAX_POLL_MS
        if request.HasField("long_polling_timeout"):
            poll_ms = min(max(request.long_polling_timeout.ToMilliseconds(), 0), MAX_POLL_MS)
        topic = request.message_queue.topic.name
        deadline = time.monotonic() + poll_ms / 1000
        engine = self.engine
        while True:
            # Every queue of the topic on this broker, whichever one the request names (the
            # proxy's ReceiveMessageQueueSelector: a client names a queue to pick a broker).
            queues = engine.queues(group_name, topic, -1)
            taken = engine.take(group, queues, tags, batch, invisible, client_id,
                                request.auto_renew)  # fmt: skip
            if taken:
                broker = context.settings.broker_name
                found = []
                for received in taken:
                    lease = received.lease
                    handle = Handle(lease.topic, lease.queue_id, lease.offset, lease.token)
                    found.append(
                        to_protocol(received.message, lease, handle.encode(broker), invisible)
                    )
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            await self._wait(queues, group_name, min(remaining, RECHECK_S))

    async def _wait(self, queues: list[tuple[str, int]], group: str, timeout_s: float) -> None:
        """Until one of ``queues`` grows past where the group reads it, or ``timeout_s``."""
        context = self._context()
        waiters = context.waiters
        # One future for every queue: the append that completes it wakes this task in the
        # loop's next turn (``asyncio.wait`` over one future per queue took a turn more).
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        store = context.store
        held = [
            waiters.hold(topic, queue_id, store.max_offset(topic, queue_id), None, woken)
            for topic, queue_id in queues
        ]
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await woken
        finally:
            for h in held:
                waiters.release(h)

    # ------------------------------------------------------------------ answers
    def ack(self, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        group = _group(request.group.name)
        entries = []
        for entry in request.entries:
            try:
                self.engine.ack(group, Handle.decode(entry.receipt_handle))
                result = status(pb.OK)
            except Refused as refused:
                result = refused.status()
            entries.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result
                )
            )
        codes = {e.status.code for e in entries}
        overall = entries[0].status if len(codes) == 1 else status(pb.MULTIPLE_RESULTS)
        return spb.AckMessageResponse(status=overall, entries=entries)

    def change_invisible(
        self, request: spb.ChangeInvisibleDurationRequest
    ) -> spb.ChangeInvisibleDurationResponse:
        context = self._context()
        group = _group(request.group.name)
        invisible = invisible_ms(request.invisible_duration.ToMilliseconds(), minimum_ms=0)
        handle = self.engine.change_invisible(
            group, Handle.decode(request.receipt_handle), invisible
        )
        return spb.ChangeInvisibleDurationResponse(
            status=status(pb.OK), receipt_handle=handle.encode(context.settings.broker_name)
        )

    def forward(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        group = _group(request.group.name)
        self.engine.forward_to_dead_letters(group, Handle.decode(request.receipt_handle))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.OK))
