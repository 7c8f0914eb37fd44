"""Pull responses straight into Arrow columns: the reader's hot path.

A read spends its Python CPU on each record: decoding it into a ``StoredMessage`` (a properties
dict built entry by entry), then walking those objects again for every column. Here one loop
over each pull body takes the fixed-size head fields and slices out the body, topic and
properties bytes; everything per property (the map column, tags, keys, the origin and
dead-letter columns) is computed by Arrow's compute kernels over whole columns.

The result is the same record batch :func:`reconsume.spark.schema.to_batch` builds from decoded
messages (tests/unit/test_spark_columns.py checks both on generated records). A batch whose
properties the kernels cannot take as they are (a name twice in one message, whose last value
wins; an entry without a name) is built by that slower path instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from reconsume.errors import CodecError
from reconsume.message import properties as props
from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.codec import HEAD_LAYOUTS, MESSAGE_MAGIC_CODE
from reconsume.message.decode import check_record, head_of, iter_records
from reconsume.message.ids import offset_msg_id
from reconsume.message.model import StoredMessage
from reconsume.message.offset_ranges import Range, is_acked
from reconsume.spark.schema import ARROW_SCHEMA, DEAD_LETTER_TIME, to_batch

_MAP = ARROW_SCHEMA.field("properties").type
_KEYS = ARROW_SCHEMA.field("keys").type
_TIMESTAMP = ARROW_SCHEMA.field("bornTimestamp").type
_NO_KEYS = pa.scalar([], _KEYS)


class Columns:
    """The rows of one record batch being gathered from pull response bodies."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.queue_ids: list[int] = []
        self.queue_offsets: list[int] = []
        self.commit_log_offsets: list[int] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume_times: list[int] = []
        self.store_hosts: list[bytes] = []
        self.bodies: list[bytes] = []
        self.topics: list[bytes] = []
        self.properties: list[bytes] = []
        self.pulls: list[tuple[bytes, int, int, Sequence[Range]]] = []
        """The arguments of each add(): what the slower path decodes again."""

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def add(self, body: bytes, low: int, high: int, skip: Sequence[Range] = ()) -> None:
        """The records of one pull response body (``body``, as the broker sent it) whose queue
        offset is in ``[low, high)`` and not in ``skip`` (sorted disjoint ranges). Raises
        CodecError on a malformed record, as decoding it would, and then adds none of them."""
        rows = _walk(body, low, high, skip)
        self.pulls.append((body, low, high, skip))
        for values, column in zip(rows, self._columns(), strict=True):
            column.extend(values)

    def _columns(self) -> tuple[list[Any], ...]:
        return (
            self.queue_ids, self.queue_offsets, self.commit_log_offsets, self.born, self.stored,
            self.reconsume_times, self.store_hosts, self.bodies, self.topics, self.properties,
        )  # fmt: skip

    def batch(self, broker: str) -> pa.RecordBatch:
        """The rows gathered so far as one record batch of SCHEMA; starts over."""
        try:
            return self._fast(broker) or self._decoded(broker)
        finally:
            self._reset()

    def _fast(self, broker: str) -> pa.RecordBatch | None:
        count = len(self)
        try:
            texts = pa.array(self.properties, pa.binary()).cast(pa.string())
            topics = pa.array(self.topics, pa.binary()).cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise CodecError(f"a record's topic or properties are not UTF-8: {exc}") from exc
        # "n\x01v\x02n\x01v\x02": the trailing separator dropped, an empty string a null (no
        # entries), then one list item per entry.
        texts = pc.utf8_rtrim(texts, props.PROPERTY_SEPARATOR)
        texts = pc.if_else(pc.equal(texts, ""), pa.nulls(count, pa.string()), texts)
        entries = pc.split_pattern(texts, props.PROPERTY_SEPARATOR)
        flat = entries.flatten()
        if len(flat) and pc.min(pc.find_substring(flat, props.NAME_VALUE_SEPARATOR)).as_py() < 1:
            return None  # an entry without a name or a separator: skipped by the decoder
        pairs = pc.split_pattern(flat, props.NAME_VALUE_SEPARATOR, max_splits=1)
        names = pc.list_element(pairs, 0)
        values = pc.list_element(pairs, 1)
        if _repeats_a_name(pc.list_parent_indices(entries), names):
            return None
        offsets = entries.offsets  # no validity bitmap: a null list is an empty run
        if offsets[0].as_py():
            offsets = pc.subtract(offsets, offsets[0])
        properties = pa.MapArray.from_arrays(offsets, names, values, type=_MAP)

        def lookup(name: str) -> pa.Array:
            return pc.map_lookup(properties, name, "last")

        uniq = lookup(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        ids = _or(uniq, None)
        if ids.null_count:
            ids = _with_offset_ids(ids, self.store_hosts, self.commit_log_offsets)
        keys = pc.utf8_trim(pc.fill_null(lookup(props.KEYS), ""), props.KEY_SEPARATOR)
        keys = pc.if_else(pc.equal(keys, ""), pa.nulls(count, pa.string()), keys)
        keys = pc.fill_null(pc.split_pattern_regex(keys, props.KEY_SEPARATOR + "+"), _NO_KEYS)
        columns = [
            ids,
            topics,
            pa.array(self.queue_ids, pa.int32()),
            pa.array(self.queue_offsets, pa.int64()),
            pa.array(self.commit_log_offsets, pa.int64()),
            pa.array(self.bodies, pa.binary()),
            properties,
            lookup(props.TAGS),
            keys.cast(_KEYS),
            pa.array(self.born, _TIMESTAMP),
            pa.array(self.stored, _TIMESTAMP),
            pa.array(self.reconsume_times, pa.int32()),
            _or(lookup(props.DLQ_ORIGIN_MESSAGE_ID), lookup(props.ORIGIN_MESSAGE_ID)),
            _or(lookup(props.DLQ_ORIGIN_TOPIC), lookup(props.RETRY_TOPIC)),
            _dead_letter_times(lookup(props.DLQ_TIME_MS)),
            lookup(props.DLQ_REASON),
            pa.array([broker] * count, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)

    def _decoded(self, broker: str) -> pa.RecordBatch:
        messages: list[StoredMessage] = []
        for body, low, high, skip in self.pulls:
            for message in iter_records(body):
                offset = message.queue_offset
                if low <= offset < high and not (skip and is_acked(skip, offset)):
                    message.body = message.uncompressed_body()
                    messages.append(message)
        return to_batch(messages, broker)


_V4_HEAD = HEAD_LAYOUTS[(8, 8)]
_V4_MIN_TOTAL = _V4_HEAD.size + 3
_V6 = sysflag.HOST_V6_MASK


def _walk(body: bytes, low: int, high: int, skip: Sequence[Range]) -> tuple[list[Any], ...]:
    """The columns Columns keeps, of the records of ``body`` that are taken; CodecError on a
    malformed record, as :func:`reconsume.message.decode.check_record` raises it (without the
    body CRC, which reads do not check). The usual record (IPv4 hosts, well formed) is checked
    on the fields one unpack of its head gives; any other goes through ``check_record`` and the
    head layout its sysFlag names (1.0-1.3 against 1.8-2.1 µs a record, bench/RESULTS.md)."""
    queue_ids: list[int] = []
    queue_offsets: list[int] = []
    commit_log_offsets: list[int] = []
    born: list[int] = []
    stored: list[int] = []
    times: list[int] = []
    store_hosts: list[bytes] = []
    bodies: list[bytes] = []
    topics: list[bytes] = []
    properties: list[bytes] = []
    unpack_v4 = _V4_HEAD.unpack_from
    pos = 0
    end = len(body)
    while pos < end:
        head = _V4_HEAD
        fields = unpack_v4(body, pos) if end - pos >= _V4_MIN_TOTAL else None
        if fields is None or not _usual(body, pos, end, fields):
            check_record(body, pos, end, verify_crc=False)  # raises what decoding would
            head = head_of(body, pos)
            fields = head.unpack_from(body, pos)
        (total, _magic, _crc, queue_id, _flag, queue_offset, physical, sys_flag, born_ts,
         _born_host, store_ts, store_host, reconsume_times, _prepared, body_len,
         ) = fields  # fmt: skip
        record_end = pos + total
        at = pos + head.size
        topic_at = at + body_len
        props_at = topic_at + 1 + body[topic_at] + 2
        if low <= queue_offset < high and not (skip and is_acked(skip, queue_offset)):
            payload = body[at:topic_at]
            if sys_flag & sysflag.COMPRESSED:
                try:
                    payload = zlib.decompress(payload)
                except zlib.error as exc:
                    raise CodecError(f"record at {pos}: body does not inflate: {exc}") from exc
            queue_ids.append(queue_id)
            queue_offsets.append(queue_offset)
            commit_log_offsets.append(physical)
            born.append(born_ts * 1000)
            stored.append(store_ts * 1000)
            times.append(reconsume_times)
            store_hosts.append(store_host)
            bodies.append(payload)
            topics.append(body[topic_at + 1 : props_at - 2])
            properties.append(body[props_at:record_end])
        pos = record_end
    return (
        queue_ids, queue_offsets, commit_log_offsets, born, stored, times, store_hosts, bodies,
        topics, properties,
    )  # fmt: skip


def _usual(body: bytes, pos: int, end: int, fields: tuple[Any, ...]) -> bool:
    """Whether the record at ``pos``, its head unpacked as IPv4 hosts' into ``fields``, has
    IPv4 hosts and passes ``check_record``'s checks (the CRC aside)."""
    total, magic, sys_flag, body_len = fields[0], fields[1], fields[7], fields[14]
    if magic != MESSAGE_MAGIC_CODE or sys_flag & _V6 or not _V4_MIN_TOTAL <= total <= end - pos:
        return False
    record_end = pos + total
    topic_at = pos + _V4_HEAD.size + body_len
    if body_len < 0 or topic_at + 1 > record_end:
        return False
    topic_len = body[topic_at]
    props_at = topic_at + 1 + topic_len + 2
    if topic_len > 127 or props_at > record_end:
        return False
    props_len = (body[props_at - 2] << 8) | body[props_at - 1]
    fits: bool = props_len <= 0x7FFF and props_at + props_len == record_end
    return fits


def _repeats_a_name(parents: pa.Array, names: pa.Array) -> bool:
    """Whether a message names a property twice (its entries are runs of ``parents``): each
    entry as one integer, row * distinct names + name, and those integers all distinct."""
    if len(names) < 2:
        return False
    encoded = names.dictionary_encode()
    keys = pc.add(
        pc.multiply(parents.cast(pa.int64()), len(encoded.dictionary)),
        encoded.indices.cast(pa.int64()),
    )
    return len(pc.unique(keys)) != len(names)


def _or(first: pa.Array, second: pa.Array | None) -> pa.Array:
    """Python's ``first or second`` per row: ``second`` where ``first`` is null or empty."""
    present = pc.fill_null(pc.not_equal(first, ""), False)
    if second is None:
        second = pa.nulls(len(first), pa.string())
    return pc.if_else(present, first, second)


def _with_offset_ids(ids: pa.Array, hosts: list[bytes], offsets: list[int]) -> pa.Array:
    """``ids`` with the offset message id where it is null (no UNIQ_KEY)."""
    filled = [
        offset_msg_id(HostAddress.unpack(hosts[i]), offsets[i]) if value is None else value
        for i, value in enumerate(ids.to_pylist())
    ]
    return pa.array(filled, pa.string())


def _dead_letter_times(texts: pa.Array) -> pa.Array:
    """RECONSUME_DLQ_TIME (milliseconds) as microseconds; null unless it is an integer."""
    valid = pc.fill_null(pc.match_substring_regex(texts, DEAD_LETTER_TIME.pattern), False)
    millis = pc.if_else(valid, texts, pa.nulls(len(texts), pa.string())).cast(pa.int64())
    return pc.multiply(millis, 1000).cast(_TIMESTAMP)
