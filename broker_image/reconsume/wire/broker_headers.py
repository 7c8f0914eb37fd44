"""Custom headers of broker requests and responses (RocketMQ 4.9.8's
``org.apache.rocketmq.common.protocol.header``), in the form of :mod:`reconsume.wire.headers`.

Fields keep RocketMQ's order. A field without a default is ``@CFNotNull`` on the Java side;
Java ``Integer`` and ``Long`` are ``int``, ``boolean``/``Boolean`` are ``bool``. A Java primitive
``boolean`` (or a ``Boolean`` initialised to false) is never null, so Java always sends it: those
fields default to False rather than None. Every class is keyword-only because several put a
required field after optional ones (and positional queue ids, flags and offsets are easy to
swap).

Headers whose Java class extends ``RpcRequestHeader`` end with ``broker_name``, that class's
``bname`` field: 4.9.8 clients fill it in with the broker they address.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

from reconsume.wire.headers import Header, wire


# ------------------------------------------------------------------ send
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE, SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageRequestHeaderV2(Header):
    """SEND_MESSAGE_V2 and SEND_REPLY_MESSAGE_V2: the V1 header under one-letter names."""

    producer_group: str = field(metadata=wire("a"))
    topic: str = field(metadata=wire("b"))
    default_topic: str = field(metadata=wire("c"))
    default_topic_queue_nums: int = field(metadata=wire("d"))
    queue_id: int = field(metadata=wire("e"))
    sys_flag: int = field(metadata=wire("f"))
    born_timestamp: int = field(metadata=wire("g"))
    flag: int = field(metadata=wire("h"))
    properties: str | None = field(default=None, metadata=wire("i"))
    reconsume_times: int | None = field(default=None, metadata=wire("j"))
    unit_mode: bool = field(default=False, metadata=wire("k"))
    max_reconsume_times: int | None = field(default=None, metadata=wire("l"))
    batch: bool = field(default=False, metadata=wire("m"))
    broker_name: str | None = field(default=None, metadata=wire("n"))

    def to_v1(self) -> SendMessageRequestHeader:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1``."""
        return SendMessageRequestHeader(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        )

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2``."""
        return cls(**{f.name: getattr(v1, f.name) for f in dataclasses.fields(v1)})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str
    transaction_id: str | None = None
    broker_name: str | None = field(default=None, metadata=wire("bname"))


# ------------------------------------------------------------------ consume
BULK_FIELD = "reconsumeBulk"
"""PULL_MESSAGE header field a reader of whole queues sets (the dead-letter jobs' data
source): reconsume's brokers then hand out more than a consumer's pull may take
(reconsume.broker.pull.BULK_TRANSFER_COUNT); Apache RocketMQ's ignore it."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None = None
    sub_version: int
    expression_type: str | None = None
    broker_name: str | None = field(default=None, metadata=wire("bname"))
    bulk: bool | None = field(default=None, metadata=wire(BULK_FIELD))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(Header):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(Header):
    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = field(default=None, metadata=wire("bname"))


# ------------------------------------------------------------------ offsets and lookups
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetResponseHeader(Header):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetMinOffsetResponseHeader(Header):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    timestamp: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetResponseHeader(Header):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    topic: str
    queue_id: int
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ViewMessageRequestHeader(Header):
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


# ------------------------------------------------------------------ clients
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterClientRequestHeader(Header):
    client_id: str = field(metadata=wire("clientID"))
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


# ------------------------------------------------------------------ admin
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicRequestHeader(Header):
    topic: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str
    remove_offset: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS; without a topic: every topic the group has offsets for."""

    consumer_group: str
    topic: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryTopicConsumeByWhoRequestHeader(Header):
    topic: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerConnectionListRequestHeader(Header):
    consumer_group: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerConfigResponseHeader(Header):
    version: str
