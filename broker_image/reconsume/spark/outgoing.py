"""The rows a write task sends, each encoded once as a batch message.

A row (``topic``, ``body`` and optional ``properties``, ``tags``, ``keys``) becomes the bytes a
SEND_BATCH_MESSAGE body holds for one message (reconsume.message.batch), so that a batch is the
join of its rows' items. The row path (the columns as dicts, :func:`to_message`, then the
properties encoded) costs ~12 µs of Python a row of a dead letter's columns;
:func:`encode_columns` builds the same items in 2-3 with Arrow's kernels over whole columns,
the mirror of the reader's reconsume.spark.columns, and leaves to the row path a batch it
cannot take as it is (a property the send's header or a delay must take, a separator inside a
name or value, a null topic or key), so that every row gets the row path's result or its
error.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from reconsume.client.producer import RetryState, retry_state
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.batch import BatchItem, encode_batch
from reconsume.message.model import Message

NO_RETRY: RetryState = (None, None)
_ALONE = frozenset({props.RECONSUME_TIME, props.MAX_RECONSUME_TIMES, props.DELAY_TIME_LEVEL})
"""Properties the row path takes out of a message (into the send's header) or sends alone."""
_MAX_PROPERTIES_BYTES = 32767
"""A batch message's properties length is a signed 16-bit field."""
_EMPTY = pa.scalar(b"", pa.binary())
_HEAD_BYTES = 20
"""totalSize, magic, bodyCRC, flag and bodyLength: five big-endian int32s."""
_THREE_ZEROS = pa.scalar(bytes(12), pa.binary())
_KEYS = pa.list_(pa.string())
SENT = frozenset({"topic", "body", "properties", "tags", "keys"})
"""The columns a message is made of."""


class Outgoing(NamedTuple):
    """One row to send: its topic, its message as a batch item, and its unique id (a tuple:
    the column path makes one a row, which a dataclass's ``__init__`` made a third of its
    cost)."""

    topic: str
    item: bytes
    uniq: str
    retry: RetryState = NO_RETRY
    """RECONSUME_TIME and MAX_RECONSUME_TIMES for a send's header (retry and DLQ topics)."""
    alone: Message | None = None
    """A message sent on its own (a delay level: a batch cannot be delayed); else None."""


def to_message(row: Mapping[str, Any]) -> Message:
    """A row (topic, body, and optional properties, tags, keys) as a message."""
    topic = row.get("topic")
    if not topic:
        raise InvalidArgumentError("a row to send has no topic")
    body = row.get("body")
    if body is None:
        body = b""
    elif isinstance(body, str):
        body = body.encode()
    properties = row.get("properties") or {}
    message = Message(
        str(topic), bytes(body), {str(k): str(v) for k, v in properties.items() if v is not None}
    )
    if row.get("tags") is not None:
        message.tags = str(row["tags"])
    if row.get("keys") is not None:
        message.keys = [str(k) for k in row["keys"] if k is not None]
    return message


def encode_row(row: Mapping[str, Any], uniq: str, *, keep_own_id: bool = False) -> Outgoing:
    """The row path: a row as a message, its properties checked and encoded; ``uniq`` its
    unique id (with ``keep_own_id``, only when its properties hold none)."""
    message = to_message(row)
    if keep_own_id:
        uniq = message.properties.setdefault(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq)
    else:
        message.properties[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    try:
        delayed = message.delay_level > 0
    except ValueError:
        level = message.properties[props.DELAY_TIME_LEVEL]
        raise InvalidArgumentError(
            f"property {props.DELAY_TIME_LEVEL} must be an integer, not {level!r}"
        ) from None
    if delayed:
        return Outgoing(message.topic, b"", uniq, alone=message)
    properties = dict(message.properties)
    retry = retry_state(message.topic, properties)
    item = BatchItem(message.flag, message.body, props.encode_properties(properties))
    return Outgoing(message.topic, encode_batch([item]), uniq, retry)


def encode_batch_rows(
    batch: pa.RecordBatch, uniq: Sequence[str], *, keep_own_ids: bool = False
) -> list[Outgoing]:
    """Every row of ``batch`` encoded, ``uniq[i]`` its unique id (with ``keep_own_ids``, of a
    row whose properties hold none): by columns when :func:`encode_columns` takes the batch,
    else row by row."""
    encoded = encode_columns(batch, uniq, keep_own_ids=keep_own_ids)
    if encoded is not None:
        return encoded
    return [
        encode_row(row, u, keep_own_id=keep_own_ids)
        for row, u in zip(rows_of(batch), uniq, strict=True)
    ]


def rows_of(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of ``batch`` as dicts of the columns a send reads, built column by column:
    each column converted at once, maps and lists cut out of their flattened values (a
    row-by-row conversion, PySpark's or Arrow's ``to_pylist``, costs 45-50 µs a row of a
    dead letter's columns, most of it timestamps no send reads; bench/RESULTS.md)."""
    columns = {
        name: _column_values(batch.column(i))
        for i, name in enumerate(batch.schema.names)
        if name in SENT
    }
    names = list(columns)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _column_values(column: pa.Array) -> list[Any]:
    """A column's values as Python objects: a map's as dicts, a list's as lists."""
    if isinstance(column, pa.MapArray):
        keys, items = column.keys.to_pylist(), column.items.to_pylist()
        return _cut(column, lambda a, b: dict(zip(keys[a:b], items[a:b], strict=True)))
    if isinstance(column, pa.ListArray):
        values = column.values.to_pylist()
        return _cut(column, lambda a, b: values[a:b])
    plain: list[Any] = column.to_pylist()
    return plain


def _cut(column: pa.ListArray, make: Callable[[int, int], Any]) -> list[Any]:
    offsets = column.offsets.to_pylist()
    valid = column.is_valid().to_pylist()
    return [make(offsets[i], offsets[i + 1]) if valid[i] else None for i in range(len(column))]


def encode_columns(
    batch: pa.RecordBatch, uniq: Sequence[str], *, keep_own_ids: bool = False
) -> list[Outgoing] | None:
    """The rows of ``batch`` as :func:`encode_row` encodes them (the properties in another
    order: the map's, then tags, keys and the unique id), built column by column; None when
    a row needs the row path (with ``keep_own_ids``, also a row with a UNIQ_KEY property)."""
    names = set(batch.schema.names)
    count = batch.num_rows
    topic = batch.column("topic")
    if topic.null_count or (count and pc.min(pc.binary_length(topic)).as_py() == 0):
        return None
    tags = batch.column("tags") if "tags" in names else None
    keys = batch.column("keys") if "keys" in names else None
    parts: list[pa.Array] = []
    if "properties" in names:
        entries = _map_entries(batch.column("properties"), tags, keys, keep_own_ids)
        if entries is None:
            return None
        parts.append(entries)
    if tags is not None:
        if _has_separator(tags):
            return None
        parts.append(
            pc.binary_join_element_wise(f"{props.TAGS}{props.NAME_VALUE_SEPARATOR}", tags, "")
        )
    if keys is not None:
        joined = _keys_value(keys)
        if joined is None:
            return None
        parts.append(joined)
    parts.append(
        pa.array(
            [f"{props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{props.NAME_VALUE_SEPARATOR}{u}" for u in uniq],
            pa.string(),
        )
    )
    joined = pc.binary_join_element_wise(*parts, props.PROPERTY_SEPARATOR, null_handling="skip")
    encoded = pc.binary_join_element_wise(joined, props.PROPERTY_SEPARATOR, "").cast(pa.binary())
    properties_bytes = pc.binary_length(encoded)
    if count and pc.max(properties_bytes).as_py() > _MAX_PROPERTIES_BYTES:
        return None
    body = _body(batch.column("body") if "body" in names else None, count)
    body_bytes = pc.binary_length(body)
    total = pc.add(pc.add(body_bytes, properties_bytes), _HEAD_BYTES + 2)
    # totalSize, then magic, bodyCRC and flag (0: the broker ignores the first two), then
    # bodyLength, the body, propertiesLength and the properties
    items = pc.binary_join_element_wise(
        _big_endian(total, "i"), _THREE_ZEROS, _big_endian(body_bytes, "i"), body,
        _big_endian(properties_bytes, "h"), encoded, _EMPTY,
    )  # fmt: skip
    rows = zip(topic.to_pylist(), items.to_pylist(), uniq, repeat(NO_RETRY), repeat(None))
    return [tuple.__new__(Outgoing, row) for row in rows]


def _map_entries(
    column: pa.MapArray, tags: pa.Array | None, keys: pa.Array | None, keep_own_ids: bool
) -> pa.Array | None:
    """Per row, the map's entries as ``name \\x01 value`` joined by ``\\x02`` (null when none):
    null values left out, and TAGS and KEYS where the tags and keys columns replace them."""
    offsets = column.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    names, values = column.keys.slice(start, end - start), column.items.slice(start, end - start)
    if _has_separator(names) or _has_separator(values):
        return None
    if len(names) and pc.min(pc.binary_length(names)).as_py() == 0:
        return None
    if pc.any(pc.is_in(names, pa.array(sorted(_ALONE)))).as_py():
        return None
    own_ids = _equal(names, props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if keep_own_ids and pc.any(own_ids).as_py():
        return None
    keep = pc.and_(values.is_valid(), pc.invert(own_ids))
    # the row of each entry (list_parent_indices of the map's offsets over its names)
    rows = pc.list_parent_indices(pa.ListArray.from_arrays(offsets, column.keys))
    for replacing, name in ((tags, props.TAGS), (keys, props.KEYS)):
        if replacing is not None:
            replaced = pc.and_(_equal(names, name), pc.take(replacing.is_valid(), rows))
            keep = pc.and_(keep, pc.invert(replaced))
    pairs = pc.binary_join_element_wise(names, values, props.NAME_VALUE_SEPARATOR)
    # where each row's kept entries start: the kept entries before its first one
    kept_before = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(keep.cast(pa.int64()))]
    )
    kept_offsets = pc.take(kept_before, pc.subtract(offsets, start)).cast(pa.int32())
    lists = pa.ListArray.from_arrays(kept_offsets, pairs.filter(keep))
    joined = pc.binary_join(lists, props.PROPERTY_SEPARATOR)
    return pc.if_else(pc.equal(pc.binary_length(joined), 0), pa.scalar(None, pa.string()), joined)


def _keys_value(keys: pa.ListArray) -> pa.Array | None:
    """Per row, the KEYS entry: the keys joined by spaces; null for a null or empty list (the
    row path removes KEYS for an empty one). None for a null key or a separator in one."""
    keys = keys.cast(_KEYS)  # Spark's array<string> with containsNull=false has no kernel
    values = keys.flatten()
    if values.null_count or _has_separator(values):
        return None
    present = pc.and_(keys.is_valid(), pc.greater(pc.list_value_length(keys), 0))
    joined = pc.binary_join(keys, props.KEY_SEPARATOR)
    entry = pc.binary_join_element_wise(f"{props.KEYS}{props.NAME_VALUE_SEPARATOR}", joined, "")
    return pc.if_else(present, entry, pa.scalar(None, pa.string()))


def _has_separator(strings: pa.Array) -> bool:
    """Whether a value of ``strings`` (a string array) may hold \\x01 or \\x02: a look at
    its whole data buffer at once (a slice's neighbours may answer yes; the row path then
    decides), where a substring kernel a separator took longer than the rest of the batch."""
    data = strings.buffers()[2]
    if data is None or data.size == 0:
        return False
    raw = data.to_pybytes()
    return props.NAME_VALUE_SEPARATOR.encode() in raw or props.PROPERTY_SEPARATOR.encode() in raw


def _equal(strings: pa.Array, value: str) -> pa.Array:
    """Per value of ``strings``: equal to ``value`` (a null is not)."""
    return pc.fill_null(pc.equal(strings, value), False)


def _big_endian(lengths: pa.Array, code: str) -> pa.Array:
    """Integers as big-endian binary values of ``array``'s ``code`` (``i``: 4 bytes, ``h``: 2)."""
    values = array(code, lengths.to_pylist())
    if sys.byteorder == "little":
        values.byteswap()
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(values.itemsize), len(values), [None, pa.py_buffer(values.tobytes())]
    )
    return fixed.cast(pa.binary())


def _body(column: pa.Array | None, count: int) -> pa.Array:
    """The bodies as binary: a string column's UTF-8, a null body empty."""
    if column is None:
        return pa.array([b""] * count, pa.binary())
    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    return pc.fill_null(column, _EMPTY)
