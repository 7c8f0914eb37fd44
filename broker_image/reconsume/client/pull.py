"""One queue's pull loop: long-poll the broker, filter, hand messages to the consume service.

Each pull carries the queue's current consume offset (the commit-offset flag), so progress
reaches the broker between the periodic commits. Errors back off for a few seconds; an offset
the broker calls illegal is replaced by the one it suggests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from reconsume.client.broker_api import BrokerApi
from reconsume.client.offsets import OffsetStore
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.routes import MessageQueue
from reconsume.client.subscription import Subscription
from reconsume.errors import CodecError, RemotingError
from reconsume.message import sysflag
from reconsume.message.decode import iter_records
from reconsume.message.model import StoredMessage
from reconsume.wire.broker_headers import PullMessageRequestHeader, PullMessageResponseHeader
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
ERROR_BACKOFF_S = 3.0
"""RocketMQ's ``PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION``."""


def decode_pulled(body: bytes, subscription: Subscription) -> list[StoredMessage]:
    """The messages of a pull response the subscription accepts, bodies inflated."""
    messages: list[StoredMessage] = []
    for message in iter_records(body):
        if not subscription.accepts(message):
            continue
        if message.sys_flag & sysflag.COMPRESSED:
            message = replace(
                message,
                body=message.uncompressed_body(),
                sys_flag=message.sys_flag & ~sysflag.COMPRESSED,
            )
        messages.append(message)
    return messages


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's answer: the messages found (none when there is nothing at the offset) and
    where the next pull starts."""

    messages: list[StoredMessage]
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class RawPull:
    """One pull's answer with its records as the broker sent them (empty when none were
    found): for a reader that decodes them its own way."""

    body: bytes
    next_begin_offset: int
    min_offset: int
    max_offset: int


async def pull_raw(
    api: BrokerApi,
    address: str,
    queue: MessageQueue,
    offset: int,
    *,
    group: str,
    max_nums: int = 32,
    bulk: bool = False,
) -> RawPull:
    """One pull of ``queue`` from ``offset`` on the broker at ``address``: no long polling, no
    offset commit, every tag; ``bulk`` asks a reconsume broker for up to its bulk caps instead
    of a consumer's 32 (reconsume.broker.pull). An offset the broker calls illegal answers no
    records and the offset it suggests as ``next_begin_offset``; any other refusal raises
    RemotingError."""
    subscription = Subscription.parse(queue.topic)
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=FLAG_SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription=subscription.expression,
        sub_version=subscription.version,
        expression_type="TAG",
        broker_name=queue.broker_name or None,
        bulk=bulk or None,
    )
    response = await api.call(address, RequestCode.PULL_MESSAGE, header.to_ext_fields())
    code = response.code
    if code not in (
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    ):
        raise RemotingError(f"pull of {queue} at {offset} from {address}: {code} {response.remark}")
    fields = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    body = response.body if code == ResponseCode.SUCCESS else b""
    return RawPull(body, fields.next_begin_offset, fields.min_offset, fields.max_offset)


async def pull_once(
    api: BrokerApi,
    address: str,
    queue: MessageQueue,
    offset: int,
    *,
    group: str,
    max_nums: int = 32,
) -> PullResult:
    """:func:`pull_raw` with its records decoded, bodies inflated."""
    raw = await pull_raw(api, address, queue, offset, group=group, max_nums=max_nums)
    messages = decode_pulled(raw.body, Subscription.parse(queue.topic)) if raw.body else []
    return PullResult(messages, raw.next_begin_offset, raw.min_offset, raw.max_offset)


class PullLoop:
    def __init__(
        self,
        pq: ProcessQueue,
        subscription: Subscription,
        offset: int,
        *,
        group: str,
        client: RemotingClient,
        broker_of: Callable[[MessageQueue], Awaitable[str]],
        offsets: OffsetStore,
        submit: Callable[[Sequence[StoredMessage], ProcessQueue], None],
        commit_in_pull: bool,
        batch_size: int,
        long_poll_ms: int,
        timeout_s: float,
    ) -> None:
        self.pq = pq
        self.offset = offset
        self._subscription = subscription
        self._group = group
        self._client = client
        self._broker_of = broker_of
        self._offsets = offsets
        self._submit = submit
        self._commit_in_pull = commit_in_pull
        self._batch_size = batch_size
        self._long_poll_ms = long_poll_ms
        self._timeout_s = timeout_s

    async def run(self) -> None:
        pq = self.pq
        while pq.is_active():
            await pq.wait_for_room()
            try:
                response = await self._pull()
            except RemotingError as exc:
                log.warning("pull from %s failed: %s", pq.queue, exc)
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            if not pq.is_active():
                return
            try:
                self._handle(response)
            except (CodecError, RemotingError) as exc:
                log.warning("pull response of %s unusable: %s", pq.queue, exc)
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def _pull(self) -> RemotingCommand:
        queue = self.pq.queue
        flags = FLAG_SUSPEND | FLAG_SUBSCRIPTION
        commit = self._offsets.current(queue) if self._commit_in_pull else None
        if commit is not None and commit > 0:
            flags |= FLAG_COMMIT_OFFSET
        header = PullMessageRequestHeader(
            consumer_group=self._group,
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=self.offset,
            max_msg_nums=self._batch_size,
            sys_flag=flags,
            commit_offset=commit or 0,
            suspend_timeout_millis=self._long_poll_ms,
            subscription=self._subscription.expression,
            sub_version=self._subscription.version,
            expression_type="TAG",
            broker_name=queue.broker_name,
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        address = await self._broker_of(queue)
        timeout_s = self._long_poll_ms / 1000 + self._timeout_s
        return await self._client.invoke(address, request, timeout_s)

    def _handle(self, response: RemotingCommand) -> None:
        pq = self.pq
        code = response.code
        if code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            raise RemotingError(f"broker answered {code}: {response.remark}")
        header = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.warning(
                "offset %d of %s is illegal; continuing from %d",
                self.offset,
                pq.queue,
                header.next_begin_offset,
            )
            self.offset = header.next_begin_offset
            if len(pq) == 0:
                self._offsets.update(pq.queue, self.offset, increase_only=False)
            return
        self.offset = header.next_begin_offset
        messages = decode_pulled(response.body, self._subscription) if code == 0 else []
        if messages:
            pq.put(messages, self.offset)
            self._submit(messages, pq)
        elif len(pq) == 0:
            # Nothing to consume up to here (filtered out, or nothing new): the committed
            # offset may move on, as RocketMQ's ``correctTagsOffset`` does.
            self._offsets.update(pq.queue, self.offset)
