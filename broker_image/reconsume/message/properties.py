"""Message property names and the properties string encoding.

Properties travel and are stored as one string: ``name \\x01 value \\x02 name \\x01 value \\x02``.
The names below are Apache RocketMQ's (``MessageConst``) so that existing clients and tools
read what reconsume writes; the DLQ_* and TIMER_DELAY_MS names are RocketMQ 5's.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconsume.errors import PropertyError

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

KEYS = "KEYS"
TAGS = "TAGS"
WAIT_STORE_MSG_OK = "WAIT"
DELAY_TIME_LEVEL = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
BUYER_ID = "BUYER_ID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
TRANSFER_FLAG = "TRANSFER_FLAG"
CORRECTION_FLAG = "CORRECTION_FLAG"
MQ2_FLAG = "MQ2_FLAG"
RECONSUME_TIME = "RECONSUME_TIME"
MSG_REGION = "MSG_REGION"
TRACE_SWITCH = "TRACE_ON"
UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
DUP_INFO = "DUP_INFO"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
INSTANCE_ID = "INSTANCE_ID"
CORRELATION_ID = "CORRELATION_ID"
MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
CLUSTER = "CLUSTER"
MESSAGE_TYPE = "MSG_TYPE"
SHARDING_KEY = "__SHARDINGKEY"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."

# reconsume's own: when and why a message became a dead letter, and reprocessing marks.
DLQ_TIME_MS = "RECONSUME_DLQ_TIME"
"""When the broker dead-lettered the message, in milliseconds since the epoch."""
DLQ_REASON = "RECONSUME_DLQ_REASON"
"""Why: ``MAX_RECONSUME_TIMES`` or ``CONSUMER_REQUESTED`` (see reconsume.engine.retry)."""
REPROCESSED = "RECONSUME_REPROCESSED"
SCHEDULE_ORIGIN = "RECONSUME_SCHEDULE_OFFSET"
"""On a message the schedule service delivered: the commit-log offset of the
SCHEDULE_TOPIC_XXXX record it came from (lets a restart count re-delivered duplicates)."""

KEY_SEPARATOR = " "


def encode_properties(properties: Mapping[str, str]) -> str:
    """Encode properties as RocketMQ's string; raises PropertyError on separator characters."""
    parts: list[str] = []
    for name, value in properties.items():
        if (
            not name
            or NAME_VALUE_SEPARATOR in name
            or PROPERTY_SEPARATOR in name
            or NAME_VALUE_SEPARATOR in value
            or PROPERTY_SEPARATOR in value
        ):
            raise PropertyError(
                f"property {name!r}={value!r}: names must be non-empty and neither names nor "
                "values may contain \\x01 or \\x02"
            )
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """Decode RocketMQ's properties string; an entry without a name-value separator is skipped
    (as RocketMQ's own decoder does), a later duplicate name wins."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


def find_property(text: str, name: str) -> str | None:
    """Read one property from an encoded properties string without decoding the rest."""
    needle = name + NAME_VALUE_SEPARATOR
    stop = len(text)
    while True:  # the last occurrence wins, as in decode_properties
        at = text.rfind(needle, 0, stop)
        if at < 0:
            return None
        if at == 0 or text[at - 1] == PROPERTY_SEPARATOR:
            begin = at + len(needle)
            end = text.find(PROPERTY_SEPARATOR, begin)
            return text[begin:] if end < 0 else text[begin:end]
        stop = at + len(needle) - 1
