"""The producer: sends messages to the brokers serving a topic, retrying elsewhere on failure.

asyncio first::

    async with Producer(["127.0.0.1:9876"], group="orders-producer") as producer:
        result = await producer.send(Message("orders", b"..."))

A send picks the next writable queue of the topic (round robin). When a broker fails with a
retriable error the send is retried, up to ``retries`` times, on a queue of another broker.

A send to ``%RETRY%<group>`` (a consumer's fallback retry) carries its RECONSUME_TIME and
MAX_RECONSUME_TIMES properties in the request header instead, where the broker reads them,
as RocketMQ's ``DefaultMQProducerImpl.sendKernelImpl`` does.
"""

from __future__ import annotations

import itertools
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

from reconsume.client.namesrv import RouteCache
from reconsume.client.routes import MessageQueue, TopicRoute, select_queue
from reconsume.errors import InvalidArgumentError, RemotingError
from reconsume.message import properties as props
from reconsume.message.batch import BatchItem, encode_batch
from reconsume.message.ids import UniqIdGenerator
from reconsume.message.model import Message
from reconsume.message.names import (
    DEFAULT_TOPIC,
    is_dead_letter_topic,
    is_retry_topic,
    validate_group,
    validate_topic,
)
from reconsume.wire.broker_headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import raise_for_response
from reconsume.wire.signing import Signing, signer_or_environment
from reconsume.wire.tls import tls_or_environment

_LOOPBACK_IP = b"\x7f\x00\x00\x01"


RetryState = tuple[int | None, int | None]
"""(reconsume times, max reconsume times) of a send to a retry topic, for its header."""


def retry_state(topic: str, properties: dict[str, str]) -> RetryState:
    """Take RECONSUME_TIME and MAX_RECONSUME_TIMES out of ``properties`` when ``topic`` is a
    retry or dead-letter topic; the values go into the send's header (a dead letter sent back
    to its DLQ keeps its reconsume times). Other topics keep them as properties."""
    if not (is_retry_topic(topic) or is_dead_letter_topic(topic)):
        return None, None

    def take(name: str) -> int | None:
        value = properties.pop(name, None)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"property {name} must be an integer, not {value!r}"
            ) from exc

    return take(props.RECONSUME_TIME), take(props.MAX_RECONSUME_TIMES)


@dataclass(frozen=True, slots=True)
class SendResult:
    msg_id: str
    """The producer-assigned unique id(s) (UNIQ_KEY), comma-separated for a batch."""
    offset_msg_id: str
    """The broker's offset id(s): where the message is stored."""
    queue: MessageQueue
    queue_offset: int


class Producer:
    def __init__(
        self,
        name_servers: Sequence[str],
        group: str = "DEFAULT_PRODUCER",
        *,
        send_timeout_s: float = 3.0,
        retries: int = 2,
        default_topic_queue_nums: int = 4,
        credentials: Signing | None = None,
        tls: bool | ssl.SSLContext | None = None,
    ) -> None:
        """A producer of ``group`` that finds brokers through ``name_servers``.
        ``credentials`` (``Credentials``, or ``CredentialFiles`` of a mounted Secret) sign every
        request (servers with access control on refuse unsigned ones); None: those of the
        environment (``RECONSUME_CREDENTIALS_DIR``, else ``RECONSUME_ACCESS_KEY`` and
        ``RECONSUME_SECRET_KEY``) when set, else unsigned.
                ``tls``: True (TLS, trusting ``RECONSUME_TLS_CA_FILE``, else the system's CAs), an
        ``ssl.SSLContext``, False (plaintext); None: as ``RECONSUME_TLS`` says.
        """
        validate_group(group)
        if retries < 0:
            raise InvalidArgumentError("retries must be >= 0")
        self.group = group
        self._client = RemotingClient(
            signer=signer_or_environment(credentials), tls=tls_or_environment(tls)
        )
        self._routes = RouteCache(self._client, name_servers, timeout_s=send_timeout_s)
        self._timeout_s = send_timeout_s
        self._retries = retries
        self._default_queues = default_topic_queue_nums
        self._ids = UniqIdGenerator(_LOOPBACK_IP)
        self._counter = itertools.count()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    async def send(self, message: Message, *, queue: MessageQueue | None = None) -> SendResult:
        """Send one message (to ``queue`` if given) and return where it was stored."""
        validate_topic(message.topic)
        properties = dict(message.properties)
        uniq = properties.setdefault(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self._ids.create())
        retry = retry_state(message.topic, properties)
        encoded = props.encode_properties(properties)
        return await self._send(
            message.topic,
            message.flag,
            encoded,
            message.body,
            uniq,
            batch=False,
            queue=queue,
            retry=retry,
        )

    def new_id(self) -> str:
        """A new unique message id (UNIQ_KEY), as this producer gives the messages it sends."""
        return self._ids.create()

    async def send_items(
        self,
        topic: str,
        items: Sequence[bytes],
        ids: Sequence[str],
        *,
        queue: MessageQueue | None = None,
        retry: RetryState = (None, None),
    ) -> SendResult:
        """Send messages already encoded as batch items (``reconsume.message.batch``, each
        with its unique id ``ids[i]`` among its properties) to ``topic`` as one request;
        ``retry`` is the RECONSUME_TIME and MAX_RECONSUME_TIMES of a batch to a retry or
        dead-letter topic. The caller vouches for the items: the broker refuses a batch whose
        lengths do not add up."""
        if not items:
            raise InvalidArgumentError("a batch needs at least one message")
        validate_topic(topic)
        return await self._send(
            topic, 0, "", b"".join(items), ",".join(ids), batch=True, queue=queue, retry=retry
        )

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> SendResult:
        """Send messages of one topic as one request; they are stored in order, in one queue.
        To a retry or dead-letter topic, every message must carry the same RECONSUME_TIME and
        MAX_RECONSUME_TIMES (the request's header holds one of each)."""
        if not messages:
            raise InvalidArgumentError("a batch needs at least one message")
        topic = messages[0].topic
        validate_topic(topic)
        items: list[BatchItem] = []
        ids: list[str] = []
        retries: set[RetryState] = {(None, None)}
        # Only a retry or dead-letter topic takes reconsume times out of the properties.
        carries_retry = is_retry_topic(topic) or is_dead_letter_topic(topic)
        if carries_retry:
            retries.clear()
        for message in messages:
            if message.topic != topic:
                raise InvalidArgumentError("every message of a batch must have the same topic")
            if message.delay_level > 0:
                raise InvalidArgumentError("a batch cannot carry delayed messages")
            properties = dict(message.properties)
            ids.append(
                properties.setdefault(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self._ids.create())
            )
            if carries_retry:
                retries.add(retry_state(topic, properties))
            items.append(BatchItem(message.flag, message.body, props.encode_properties(properties)))
        if len(retries) > 1:
            raise InvalidArgumentError(
                "every message of a batch to a retry or dead-letter topic must have the same "
                "reconsume times"
            )
        return await self._send(
            topic,
            0,
            "",
            encode_batch(items),
            ",".join(ids),
            batch=True,
            queue=queue,
            retry=retries.pop(),
        )

    async def _send(
        self,
        topic: str,
        flag: int,
        properties: str,
        body: bytes,
        uniq: str,
        *,
        batch: bool,
        queue: MessageQueue | None,
        retry: RetryState = (None, None),
    ) -> SendResult:
        failed_broker: str | None = None
        last_error: RemotingError | None = None
        for attempt in range(self._retries + 1):
            route = await self._routes.for_sending(topic, refresh=attempt > 0)
            target = queue or select_queue(route.write_queues, next(self._counter), failed_broker)
            try:
                return await self._send_to(
                    _master(route, target), target, flag, properties, body, uniq, batch, retry
                )
            except RemotingError as exc:
                if not exc.retriable or queue is not None:
                    raise
                last_error = exc
                failed_broker = target.broker_name
        assert last_error is not None
        raise last_error

    async def send_direct(self, address: str, message: Message, queue: MessageQueue) -> SendResult:
        """Send one message to ``queue`` on the broker at ``address`` without asking a name
        server: for topics no route names yet (just created on that broker). No retries."""
        validate_topic(message.topic)
        properties = dict(message.properties)
        uniq = properties.setdefault(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self._ids.create())
        encoded = props.encode_properties(properties)
        return await self._send_to(
            address, queue, message.flag, encoded, message.body, uniq, False, (None, None)
        )

    async def _send_to(
        self,
        address: str,
        queue: MessageQueue,
        flag: int,
        properties: str,
        body: bytes,
        uniq: str,
        batch: bool,
        retry: RetryState,
    ) -> SendResult:
        header = SendMessageRequestHeaderV2(
            producer_group=self.group,
            topic=queue.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=self._default_queues,
            queue_id=queue.queue_id,
            sys_flag=0,
            born_timestamp=time.time_ns() // 1_000_000,
            flag=flag,
            properties=properties,
            reconsume_times=retry[0] or 0,
            max_reconsume_times=retry[1],
            batch=batch,
            broker_name=queue.broker_name,
        )
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        request = RemotingCommand.request(code, header.to_ext_fields(), body)
        response = await self._client.invoke(address, request, self._timeout_s)
        raise_for_response(response, f"send to {queue.topic} on {queue.broker_name}")
        answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        stored = MessageQueue(queue.topic, queue.broker_name, answer.queue_id)
        return SendResult(uniq, answer.msg_id, stored, answer.queue_offset)


def _master(route: TopicRoute, queue: MessageQueue) -> str:
    address = route.master_of(queue.broker_name)
    if address is None:
        raise RemotingError(f"broker {queue.broker_name} has no master in the route")
    return address
