"""reconsume's ACK_QUEUE_OFFSETS and QUERY_ACKED_OFFSETS: offsets a group handled past its
committed offset (:mod:`reconsume.store.acked`), for dead-letter jobs that leave the dead
letters their filter does not match where they are.

Both take QUERY_CONSUMER_OFFSET's header (``consumerGroup``, ``topic``, ``queueId``). An ack's
body is ``{"ranges": [[start, end], ...]}`` (queue offsets, end excluded); the answer of both is
``{"committedOffset": C, "acked": [[start, end], ...]}``: the group's committed offset after
folding in what reaches it, and what is held past it. An ack moves the committed offset like
UPDATE_CONSUMER_OFFSET does; a range past the queue's max offset is refused (nothing there can
have been handled), and nothing is changed.
"""

from __future__ import annotations

import json
from typing import Any

from reconsume.broker.context import BrokerContext
from reconsume.errors import InvalidArgumentError
from reconsume.message.offset_ranges import Range
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.broker_headers import QueryConsumerOffsetRequestHeader
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection


def decode_ranges(body: bytes | None) -> list[Range]:
    """An ack's ranges; InvalidArgumentError when the body is not ``{"ranges": [[s, e]...]}``
    of integers with ``s <= e``."""
    try:
        document = json.loads(body or b"")
        ranges = [(int(start), int(end)) for start, end in document["ranges"]]
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidArgumentError(
            f'the body is not {{"ranges": [[start, end], ...]}}: {exc}'
        ) from exc
    for start, end in ranges:
        if end < start:
            raise InvalidArgumentError(f"range [{start}, {end}) ends before it starts")
    return ranges


def encode_answer(committed: int, acked: list[Range]) -> bytes:
    answer: dict[str, Any] = {"committedOffset": committed, "acked": [list(r) for r in acked]}
    return json.dumps(answer, separators=(",", ":")).encode()


class AckedOffsetsProcessor:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context

    def _committed(self, key: str, topic: str, queue_id: int) -> int:
        store = self.context.store
        offset = store.consumer_offsets.get(key, queue_id)
        low = store.min_offset(topic, queue_id)
        return low if offset is None or offset < low else offset

    def ack(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        try:
            ranges = decode_ranges(request.body)
        except InvalidArgumentError as exc:
            return request.respond(ResponseCode.SYSTEM_ERROR, str(exc))
        store = self.context.store
        high = store.max_offset(header.topic, header.queue_id)
        beyond = [r for r in ranges if r[1] > high]
        if beyond:
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"{header.topic} queue {header.queue_id} ends at {high}: "
                f"{beyond[0]} cannot have been handled",
            )
        key = consumer_offset_key(header.topic, header.consumer_group)
        before = self._committed(key, header.topic, header.queue_id)
        try:
            committed, acked = store.acked.ack(key, header.queue_id, before, ranges)
        except InvalidArgumentError as exc:
            return request.respond(ResponseCode.SYSTEM_ERROR, str(exc))
        if committed != before or store.consumer_offsets.get(key, header.queue_id) is None:
            store.consumer_offsets.set(key, header.queue_id, committed)
        return request.respond(body=encode_answer(committed, acked))

    def query(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        key = consumer_offset_key(header.topic, header.consumer_group)
        committed = self._committed(key, header.topic, header.queue_id)
        acked = [r for r in self.context.store.acked.get(key, header.queue_id) if r[1] > committed]
        return request.respond(body=encode_answer(committed, acked))
