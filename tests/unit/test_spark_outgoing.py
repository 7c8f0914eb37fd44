"""Rows to send encoded column by column (reconsume.spark.outgoing.encode_columns) give the
messages the row path gives, or leave the batch to it; either way every row gets the row
path's message or its error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

import pyarrow as pa

from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.batch import decode_batch
from reconsume.spark.outgoing import (
    encode_batch_rows,
    encode_columns,
    encode_row,
    rows_of,
)

MAP = pa.map_(pa.string(), pa.string())
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("body", pa.binary()),
        ("properties", MAP),
        ("tags", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("ignored", pa.int64()),
    ]
)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
NAMES = st.one_of(
    st.sampled_from(
        [
            props.TAGS, props.KEYS, props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, props.DLQ_ORIGIN_TOPIC,
            props.RECONSUME_TIME, props.DELAY_TIME_LEVEL, "number", "a\x01b", "",
        ]
    ),
    TEXT,
)  # fmt: skip
VALUES = st.one_of(st.none(), st.sampled_from(["1", "", "x y", "v\x02"]), TEXT)
ROW = st.fixed_dictionaries(
    {
        "topic": st.one_of(st.sampled_from(["orders", "%DLQ%g", "%RETRY%g"]), st.just(None)),
        "body": st.one_of(st.none(), st.binary(max_size=40)),
        "properties": st.one_of(
            st.none(), st.lists(st.tuples(NAMES, VALUES), max_size=5, unique_by=lambda e: e[0])
        ),
        "tags": st.one_of(st.none(), st.sampled_from(["even", "", "t\x01"]), TEXT),
        "keys": st.one_of(
            st.none(),
            st.lists(st.one_of(st.none(), st.sampled_from(["k", "", "k 2"]), TEXT), max_size=3),
        ),
        "ignored": st.integers(0, 9),
    }
)


def _batch(rows: list[dict[str, Any]]) -> Any:
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def _message(item: bytes) -> tuple[bytes, dict[str, str]]:
    (decoded,) = decode_batch(item)
    return decoded.body, props.decode_properties(decoded.properties)


def _row_path(row: dict[str, Any], uniq: str, keep_own_id: bool) -> Any:
    try:
        return encode_row(row, uniq, keep_own_id=keep_own_id)
    except InvalidArgumentError as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=6), keep_own_ids=st.booleans())
def test_columns_give_the_row_paths_messages_or_leave_the_batch_to_it(
    rows: list[dict[str, Any]], keep_own_ids: bool
) -> None:
    batch = _batch(rows)
    uniq = [f"{i:032X}" for i in range(len(rows))]
    expected = [
        _row_path(row, u, keep_own_ids) for row, u in zip(rows_of(batch), uniq, strict=True)
    ]
    fast = encode_columns(batch, uniq, keep_own_ids=keep_own_ids)
    if fast is None:
        return
    assert all(not isinstance(e, type) for e in expected), "the columns took a refused row"
    for got, want in zip(fast, expected, strict=True):
        assert (got.topic, got.uniq, got.retry, got.alone) == (
            want.topic,
            want.uniq,
            want.retry,
            None,
        )
        assert _message(got.item) == _message(want.item)
        assert decode_batch(got.item)[0].flag == 0


@pytest.mark.parametrize("spark_types", [False, True])
def test_a_dead_letter_batch_takes_the_column_path(spark_types: bool) -> None:
    dead_letter = [
        (props.DLQ_ORIGIN_TOPIC, "orders"), (props.TAGS, "old"), (props.KEYS, "k0"),
        (props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "stale"), ("number", "7"),
    ]  # fmt: skip
    rows = [
        {"topic": "orders", "body": b"\x00" * 1024, "properties": dead_letter, "tags": "t",
         "keys": ["k1", "k2"], "ignored": i}
        for i in range(300)
    ]  # fmt: skip
    batch = _batch(rows)
    if spark_types:  # as Spark hands a writer its frame: keys and map values declared non-null
        schema = SCHEMA.set(
            2,
            pa.field(
                "properties", pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))
            ),
        )
        schema = schema.set(
            4, pa.field("keys", pa.list_(pa.field("element", pa.string(), nullable=False)))
        )
        batch = batch.cast(schema)
    fast = encode_columns(batch, [f"U{i}" for i in range(300)])
    assert fast is not None
    body, properties = _message(fast[299].item)
    assert body == b"\x00" * 1024
    assert properties == {
        props.DLQ_ORIGIN_TOPIC: "orders", props.TAGS: "t", props.KEYS: "k1 k2", "number": "7",
        props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U299",
    }  # fmt: skip


@pytest.mark.parametrize(
    "row",
    [
        {"topic": "orders", "properties": [(props.DELAY_TIME_LEVEL, "3")]},
        {"topic": "%RETRY%g", "properties": [(props.RECONSUME_TIME, "2")]},
        {"topic": "orders", "properties": [("a", "x\x02y")]},
        {"topic": "orders", "keys": ["k", None]},
        {"topic": None},
    ],
)
def test_rows_the_columns_leave_to_the_row_path(row: dict[str, Any]) -> None:
    assert encode_columns(_batch([row]), ["U"]) is None


def test_a_delayed_row_goes_alone_and_a_retry_row_carries_its_reconsume_times() -> None:
    rows = [
        {"topic": "orders", "body": b"d", "properties": [(props.DELAY_TIME_LEVEL, "3")]},
        {"topic": "%DLQ%g", "properties": [(props.RECONSUME_TIME, "2"), ("a", "1")]},
    ]
    delayed, retried = encode_batch_rows(_batch(rows), ["U0", "U1"])
    assert delayed.alone is not None
    assert delayed.alone.delay_level == 3
    assert retried.retry == (2, None)
    assert _message(retried.item)[1] == {"a": "1", props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"}


def test_a_row_keeps_its_own_id_when_asked() -> None:
    rows = [
        {"topic": "t", "properties": [(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "OWN")]},
        {"topic": "t"},
    ]
    own, new = encode_batch_rows(_batch(rows), ["U0", "U1"], keep_own_ids=True)
    assert (own.uniq, new.uniq) == ("OWN", "U1")
    replaced, _ = encode_batch_rows(_batch(rows), ["U0", "U1"])
    assert replaced.uniq == "U0"
    assert _message(replaced.item)[1] == {props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U0"}


def test_a_refused_row_fails_the_batch_with_the_row_paths_error() -> None:
    with pytest.raises(InvalidArgumentError, match="a row to send has no topic"):
        encode_batch_rows(_batch([{"topic": "t"}, {"topic": ""}]), ["U0", "U1"])
    with pytest.raises(InvalidArgumentError, match="may contain"):
        encode_batch_rows(_batch([{"topic": "t", "tags": "a\x02"}]), ["U0"])
