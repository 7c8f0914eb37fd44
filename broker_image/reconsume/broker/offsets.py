"""Consumer offsets and queue offsets: QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET,
GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME
(RocketMQ's ``ConsumerManageProcessor`` and ``AdminBrokerProcessor``)."""

from __future__ import annotations

import os

from reconsume.broker.consume_types import remoting_refusal
from reconsume.broker.context import BrokerContext
from reconsume.message.decode import peek_routing
from reconsume.store import MessageStore
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.broker_headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40
"""RocketMQ's ``accessMessageInMemoryMaxRatio``: the share of physical memory (percent) the
newest part of the commit log is assumed to occupy in the page cache."""


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # not on this platform: assume 4 GiB
        return 4 << 30


def first_message_in_memory(store: MessageStore, topic: str, queue_id: int, memory: int) -> bool:
    """RocketMQ's ``!checkInDiskByConsumeOffset(topic, queue, 0)``: true when the queue has no
    entry at offset 0 or when that message is recent enough to be in the page cache (within
    ``memory`` bytes of the commit log's end)."""
    entries = store.queue_entries(topic, queue_id, 0, 1)
    if not entries:
        return True
    return store.commitlog.write_offset - entries[0][0] <= memory


class OffsetProcessor:
    def __init__(self, context: BrokerContext, memory_budget: int | None = None) -> None:
        self.context = context
        self.memory_budget = (
            physical_memory_bytes() * ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO // 100
            if memory_budget is None
            else memory_budget
        )

    def query_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """The committed offset. With none: 0 when the queue starts at 0 and its first message
        is still cheap to read (a new group then consumes from the beginning), else
        QUERY_NOT_FOUND and the client picks its start by ``consumeFromWhere``, as RocketMQ."""
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        store = self.context.store
        offset = store.consumer_offsets.get(
            consumer_offset_key(header.topic, header.consumer_group), header.queue_id
        )
        if offset is None or offset < 0:
            if store.min_offset(header.topic, header.queue_id) > 0 or not first_message_in_memory(
                store, header.topic, header.queue_id, self.memory_budget
            ):
                return request.respond(
                    ResponseCode.QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
            offset = 0
        response = QueryConsumerOffsetResponseHeader(offset=offset)
        return request.respond(ext_fields=response.to_ext_fields())

    def update_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """Store a 4.x consumer's committed offset; refused (NO_PERMISSION) for a group
        declared POP, whose offset the pop engine's leases keep."""
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        group = self.context.store.groups.get(header.consumer_group)
        refusal = None if group is None else remoting_refusal(group, "offset commits")
        if refusal is not None:
            return request.respond(ResponseCode.NO_PERMISSION, refusal)
        key = consumer_offset_key(header.topic, header.consumer_group)
        store = self.context.store
        store.consumer_offsets.set(key, header.queue_id, header.commit_offset)
        store.acked.trim(key, header.queue_id, header.commit_offset)
        return request.respond()

    def max_offset(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        context = self.context
        offset = context.store.max_offset(header.topic, header.queue_id, context.read_limit)
        return request.respond(ext_fields=GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())

    def min_offset(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.context.store.min_offset(header.topic, header.queue_id)
        return request.respond(ext_fields=GetMinOffsetResponseHeader(offset=offset).to_ext_fields())

    def search_offset(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.context.store.offset_by_time(header.topic, header.queue_id, header.timestamp)
        return request.respond(ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext_fields())

    def earliest_store_time(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """Store time of the queue's oldest kept message; -1 when there is none."""
        header = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        store = self.context.store
        timestamp = -1
        first = store.min_offset(header.topic, header.queue_id)
        entries = store.queue_entries(header.topic, header.queue_id, first, 1)
        if entries:
            record = store.read_message(entries[0][0])
            if record is not None:
                timestamp = peek_routing(record, 0)[3]
        response = GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp)
        return request.respond(ext_fields=response.to_ext_fields())
