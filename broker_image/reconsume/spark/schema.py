"""The rows a read yields: one per stored message, with the retry and dead-letter state the
broker keeps in properties pulled out into columns."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from reconsume.message import properties as props
from reconsume.message.model import StoredMessage

SCHEMA = StructType(
    [
        StructField("msgId", StringType(), nullable=False),
        StructField("topic", StringType(), nullable=False),
        StructField("queueId", IntegerType(), nullable=False),
        StructField("queueOffset", LongType(), nullable=False),
        StructField("commitLogOffset", LongType(), nullable=False),
        StructField("body", BinaryType(), nullable=False),
        StructField("properties", MapType(StringType(), StringType(), False), nullable=False),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType(), False), nullable=False),
        StructField("bornTimestamp", TimestampType(), nullable=False),
        StructField("storeTimestamp", TimestampType(), nullable=False),
        StructField("reconsumeTimes", IntegerType(), nullable=False),
        StructField("originMsgId", StringType()),
        StructField("originTopic", StringType()),
        StructField("deadLetterTime", TimestampType()),
        StructField("deadLetterReason", StringType()),
        StructField("broker", StringType(), nullable=False),
    ]
)
"""msgId is the producer's unique id (UNIQ_KEY, what clients show as the message id), else the
offset message id. originMsgId and originTopic are those of the message first consumed
(DLQ_ORIGIN_* on a dead letter, ORIGIN_MESSAGE_ID / RETRY_TOPIC on a retry); the dead-letter
columns are null on messages that are not dead letters."""

Row = tuple[
    str,
    str,
    int,
    int,
    int,
    bytes,
    dict[str, str],
    str | None,
    list[str],
    datetime,
    datetime,
    int,
    str | None,
    str | None,
    datetime | None,
    str | None,
    str,
]


def _timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _dead_letter_time(text: str | None) -> datetime | None:
    if text is None or not text.strip().lstrip("-").isdigit():
        return None
    return _timestamp(int(text))


def to_row(message: StoredMessage, broker: str) -> Row:
    """``message`` (body already inflated) as a row of SCHEMA."""
    p = message.properties
    return (
        message.uniq_key or message.msg_id,
        message.topic,
        message.queue_id,
        message.queue_offset,
        message.commit_log_offset,
        message.body,
        dict(p),
        message.tags,
        message.keys,
        _timestamp(message.born_timestamp_ms),
        _timestamp(message.store_timestamp_ms),
        message.reconsume_times,
        p.get(props.DLQ_ORIGIN_MESSAGE_ID) or p.get(props.ORIGIN_MESSAGE_ID),
        p.get(props.DLQ_ORIGIN_TOPIC) or p.get(props.RETRY_TOPIC),
        _dead_letter_time(p.get(props.DLQ_TIME_MS)),
        p.get(props.DLQ_REASON),
        broker,
    )
