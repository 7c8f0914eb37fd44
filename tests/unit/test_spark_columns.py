"""Pull bodies straight into Arrow columns (reconsume.spark.columns) give the record batch that
decoding each record and building the batch from the messages gives (schema.to_batch)."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")  # reconsume.spark.schema builds on pyspark's types

from reconsume.errors import CodecError
from reconsume.message import properties as props
from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.codec import encode_record
from reconsume.message.decode import iter_records
from reconsume.message.offset_ranges import is_acked
from reconsume.spark.columns import Columns, _walk
from reconsume.spark.schema import to_batch

HOSTS = [
    HostAddress(bytes([10, 0, 0, 1]), 10911),
    HostAddress(bytes(range(16)), 30911),
]
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
"""Property names and values, separators included: what a client may put in a record."""
NAMED = st.sampled_from(
    [
        props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, props.KEYS, props.TAGS, props.DLQ_ORIGIN_MESSAGE_ID,
        props.ORIGIN_MESSAGE_ID, props.DLQ_ORIGIN_TOPIC, props.RETRY_TOPIC, props.DLQ_TIME_MS,
        props.DLQ_REASON,
    ]
)  # fmt: skip
VALUES = st.one_of(
    TEXT,
    st.sampled_from(["", " ", "a b", "  a  b ", "-5", "--5", "12\n", "1700000000000", "²"]),
    st.integers(-(10**17), 10**17).map(str),
)
ENTRY = st.tuples(st.one_of(NAMED, TEXT), VALUES)


def _properties(entries: list[tuple[str, str]], trailing: bool) -> str:
    text = props.PROPERTY_SEPARATOR.join(n + props.NAME_VALUE_SEPARATOR + v for n, v in entries)
    return text + (props.PROPERTY_SEPARATOR if trailing and entries else "")


RECORD = st.fixed_dictionaries(
    {
        "queue_offset": st.integers(0, 40),
        "hosts": st.tuples(st.sampled_from(HOSTS), st.sampled_from(HOSTS)),
        "compressed": st.booleans(),
        "body": st.binary(max_size=64),
        "topic": st.sampled_from(["%DLQ%orders", "TopicTest", "t"]),
        "properties": st.one_of(
            st.builds(_properties, st.lists(ENTRY, max_size=6), st.booleans()),
            st.lists(st.tuples(NAMED, VALUES), max_size=6, unique_by=lambda e: e[0]).map(
                lambda e: _properties(e, True)
            ),
        ),
        "times": st.tuples(st.integers(0, 2**41), st.integers(0, 2**41), st.integers(0, 16)),
    }
)


def _encode(record: dict[str, object], physical: int) -> bytes:
    born, store = record["hosts"]  # type: ignore[misc]
    body: bytes = record["body"]  # type: ignore[assignment]
    flag = 0
    if record["compressed"]:
        body, flag = zlib.compress(body), sysflag.COMPRESSED
    born_ts, store_ts, times = record["times"]  # type: ignore[misc]
    return encode_record(
        queue_id=3, flag=0, queue_offset=record["queue_offset"],  # type: ignore[arg-type]
        physical_offset=physical, sys_flag=flag, born_timestamp_ms=born_ts, born_host=born,
        store_timestamp_ms=store_ts, store_host=store, reconsume_times=times,
        prepared_transaction_offset=0, body=body, topic=record["topic"],  # type: ignore[arg-type]
        properties=record["properties"],  # type: ignore[arg-type]
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(RECORD, max_size=5), min_size=1, max_size=3),
    st.integers(0, 10),
    st.integers(10, 41),
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 5)), max_size=3),
)
def test_columns_build_the_batch_decoded_messages_build(
    pulls: list[list[dict[str, object]]], low: int, high: int, holes: list[tuple[int, int]]
) -> None:
    skip = sorted({(start, start + length) for start, length in holes})
    merged: list[tuple[int, int]] = []
    for start, end in skip:  # disjoint, as skipOffsets are
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    columns = Columns()
    expected = []
    physical = 0
    for pull in pulls:
        body = b""
        for record in pull:
            body += _encode(record, physical + len(body))
        physical += len(body) + 100
        columns.add(body, low, high, merged)
        for message in iter_records(body):
            if low <= message.queue_offset < high and not is_acked(merged, message.queue_offset):
                message.body = message.uncompressed_body()
                expected.append(message)
    assert len(columns) == len(expected)
    got = columns.batch("broker-a")
    assert len(columns) == 0
    want = to_batch(expected, "broker-a")
    assert got.schema == want.schema
    for name in want.schema.names:
        assert got.column(name).equals(want.column(name)), (name, got.column(name))


def test_a_malformed_record_is_a_codec_error_and_the_batch_keeps_what_came_before() -> None:
    good = _encode(
        {"queue_offset": 0, "hosts": (HOSTS[0], HOSTS[0]), "compressed": False, "body": b"x",
         "topic": "t", "properties": "", "times": (1, 2, 0)},
        0,
    )  # fmt: skip
    columns = Columns()
    columns.add(good, 0, 10)
    lengths_off = good[:-2] + b"\0\1"  # a properties length past totalSize
    for broken in (good[:-1], good[:4] + b"\0\0\0\0" + good[8:], good[:30], lengths_off):
        with pytest.raises(CodecError):
            columns.add(broken, 0, 10)
    assert len(columns) == 1
    assert columns.batch("b").column("body").to_pylist() == [b"x"]
    not_utf8 = good.replace(b"x\x01t\x00\x00", b"x\x01\xff\x00\x00")
    assert not_utf8 != good
    columns.add(not_utf8, 0, 10)
    with pytest.raises(CodecError, match="not UTF-8"):
        columns.batch("b")
    assert len(columns) == 0


def _dead_letter(offset: int, properties: str) -> bytes:
    return _encode(
        {"queue_offset": offset, "hosts": (HOSTS[0], HOSTS[1]), "compressed": False,
         "body": b"b%d" % offset, "topic": "%DLQ%orders", "properties": properties,
         "times": (1, 2, 16)},
        offset * 200,
    )  # fmt: skip


def test_messages_naming_each_property_once_take_the_column_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def decoded(_self: Columns, _broker: str) -> None:
        raise AssertionError("built from decoded messages")

    monkeypatch.setattr(Columns, "_decoded", decoded)
    columns = Columns()
    text = props.encode_properties({props.TAGS: "timeout", props.KEYS: "k1 k2", "UNIQ_KEY": "U"})
    columns.add(_dead_letter(0, text) + _dead_letter(1, ""), 0, 10)
    batch = columns.batch("b")
    assert batch.column("msgId").to_pylist()[0] == "U"
    assert batch.column("keys").to_pylist() == [["k1", "k2"], []]


def test_a_property_named_twice_keeps_its_last_value() -> None:
    columns = Columns()
    columns.add(_dead_letter(0, _properties([(props.TAGS, "a"), (props.TAGS, "b")], True)), 0, 1)
    batch = columns.batch("b")
    assert batch.column("tags").to_pylist() == ["b"]
    assert batch.column("properties").to_pylist() == [[(props.TAGS, "b")]]


USUAL = RECORD.map(lambda r: {**r, "hosts": (HOSTS[0], HOSTS[0]), "compressed": False})
"""Records as most pulls hold them: IPv4 hosts, uncompressed (the walk's one-unpack path)."""


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(USUAL, USUAL, RECORD), max_size=6), st.integers(0, 10), st.integers(10, 41)
)
def test_the_walk_takes_what_decoding_takes_from_usual_and_other_records(
    records: list[dict[str, object]], low: int, high: int
) -> None:
    body = b"".join(_encode(r, i * 500) for i, r in enumerate(records))
    (_ids, offsets, physical, born, stored, times, hosts, bodies, topics, properties) = _walk(
        body, low, high, ()
    )
    taken = [m for m in iter_records(body) if low <= m.queue_offset < high]
    wanted = [r for r in records if low <= r["queue_offset"] < high]  # type: ignore[operator]
    assert offsets == [m.queue_offset for m in taken]
    assert physical == [m.commit_log_offset for m in taken]
    assert (born, stored) == (
        [m.born_timestamp_ms * 1000 for m in taken],
        [m.store_timestamp_ms * 1000 for m in taken],
    )
    assert times == [m.reconsume_times for m in taken]
    assert hosts == [m.store_host.packed() for m in taken]
    assert bodies == [r["body"] for r in wanted]
    assert topics == [str(r["topic"]).encode() for r in wanted]
    assert properties == [str(r["properties"]).encode() for r in wanted]
