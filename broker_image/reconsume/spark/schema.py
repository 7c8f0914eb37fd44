"""The rows a read yields: one per stored message, with the retry and dead-letter state the
broker keeps in properties pulled out into columns."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
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

ARROW_SCHEMA: pa.Schema = to_arrow_schema(SCHEMA, timezone="UTC")
"""SCHEMA in Arrow's terms, as PySpark compares a reader's record batches with it."""

DEAD_LETTER_TIME = re.compile("^-?[0-9]{1,15}$")
"""What a RECONSUME_DLQ_TIME property (milliseconds) must be for the deadLetterTime column; else
the column is null. At most 15 digits, so that its microseconds fit 64 bits. Anchored with ``^``
and ``$`` for Arrow's RE2 (where ``$`` is the end of the text), used with ``fullmatch`` here."""

_MAP = ARROW_SCHEMA.field("properties").type
_KEYS = ARROW_SCHEMA.field("keys").type
_TIMESTAMP = ARROW_SCHEMA.field("bornTimestamp").type


def to_batch(messages: Sequence[StoredMessage], broker: str) -> pa.RecordBatch:
    """``messages`` (bodies already inflated) as one Arrow record batch of SCHEMA, built column
    by column: a reader that yields these is passed through by PySpark, where rows went through
    its generic per-value converters (twice the CPU per message, bench/RESULTS.md)."""
    count = len(messages)
    ids: list[str] = []
    keys: list[str] = []
    key_offsets = [0]
    names: list[str] = []
    values: list[str] = []
    map_offsets = [0]
    origin_ids: list[str | None] = []
    origin_topics: list[str | None] = []
    dead_times: list[int | None] = []
    reasons: list[str | None] = []
    for m in messages:
        p = m.properties
        ids.append(m.uniq_key or m.msg_id)
        keys.extend(m.keys)
        key_offsets.append(len(keys))
        names.extend(p)
        values.extend(p.values())
        map_offsets.append(len(names))
        origin_ids.append(p.get(props.DLQ_ORIGIN_MESSAGE_ID) or p.get(props.ORIGIN_MESSAGE_ID))
        origin_topics.append(p.get(props.DLQ_ORIGIN_TOPIC) or p.get(props.RETRY_TOPIC))
        dead_times.append(_dead_letter_us(p.get(props.DLQ_TIME_MS)))
        reasons.append(p.get(props.DLQ_REASON))
    columns = [
        pa.array(ids, pa.string()),
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.commit_log_offset for m in messages], pa.int64()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.MapArray.from_arrays(
            pa.array(map_offsets, pa.int32()),
            pa.array(names, pa.string()),
            pa.array(values, pa.string()),
            type=_MAP,
        ),
        pa.array([m.tags for m in messages], pa.string()),
        pa.ListArray.from_arrays(
            pa.array(key_offsets, pa.int32()), pa.array(keys, pa.string()), type=_KEYS
        ),
        pa.array([m.born_timestamp_ms * 1000 for m in messages], _TIMESTAMP),
        pa.array([m.store_timestamp_ms * 1000 for m in messages], _TIMESTAMP),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
        pa.array(origin_ids, pa.string()),
        pa.array(origin_topics, pa.string()),
        pa.array(dead_times, _TIMESTAMP),
        pa.array(reasons, pa.string()),
        pa.array([broker] * count, pa.string()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _dead_letter_us(text: str | None) -> int | None:
    if text is None or DEAD_LETTER_TIME.fullmatch(text) is None:
        return None
    return int(text) * 1000
