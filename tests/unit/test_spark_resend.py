"""A Reprocess without a filter resets each batch's retry state with Arrow kernels
(reconsume.spark.jobs.resend): every row's properties lose the reset names and gain
ORIGIN_MESSAGE_ID (the origin id, else the message id) and the job's marker after the rest, as
the DataFrame path's ``map_filter`` and ``map_concat`` give; rows without a target are not
sent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow as pa

from reconsume.message import properties as props
from reconsume.spark.jobs.frames import REPROCESSED, RESET
from reconsume.spark.jobs.resend import SENT_COLUMNS, resend_batch, reset_properties
from reconsume.spark.schema import ARROW_SCHEMA

JOB = "job-1"
NAMES = st.one_of(
    st.sampled_from([*RESET, "number", "a", props.TAGS, props.KEYS]), st.text(max_size=6)
)
VALUES = st.one_of(st.sampled_from(["1", "", "x y"]), st.text(max_size=6))
ENTRIES = st.lists(st.tuples(NAMES, VALUES), max_size=6, unique_by=lambda entry: entry[0])
ROWS = st.lists(
    st.tuples(st.one_of(st.none(), ENTRIES), st.sampled_from(["o-1", "o-2", "o-3"])), max_size=12
)


def expected(entries: list[tuple[str, str]] | None, origin: str) -> list[tuple[str, str]]:
    kept = [(name, value) for name, value in entries or [] if name not in RESET]
    return [*kept, (props.ORIGIN_MESSAGE_ID, origin), (REPROCESSED, JOB)]


@settings(max_examples=200, deadline=None)
@given(rows=ROWS, cut=st.integers(0, 3))
def test_reset_properties_keeps_the_rest_and_adds_the_origin_and_the_job(
    rows: list[tuple[list[tuple[str, str]] | None, str]], cut: int
) -> None:
    maps = pa.array([entries for entries, _ in rows], pa.map_(pa.string(), pa.string()))
    origins = pa.array([origin for _, origin in rows], pa.string())
    # a slice of a longer array too: offsets that do not start at 0
    start = min(cut, len(rows))
    maps, origins, rows = maps.slice(start), origins.slice(start), rows[start:]
    reset = reset_properties(maps, origins, JOB, RESET, REPROCESSED)
    assert reset.to_pylist() == [expected(entries, origin) for entries, origin in rows]


def dead_letters(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """A read's batch (ARROW_SCHEMA) with the columns a re-send reads set from ``rows``."""
    full = []
    for i, row in enumerate(rows):
        full.append({
            "msgId": f"m-{i}", "topic": "%DLQ%g", "queueId": 0, "queueOffset": 10 + i,
            "commitLogOffset": 100 * i, "body": f"b-{i}".encode(),
            "properties": [(props.DLQ_ORIGIN_TOPIC, "orders"), ("number", str(i))],
            "tags": "t", "keys": ["k"], "bornTimestamp": 0, "storeTimestamp": 0,
            "reconsumeTimes": 16, "originMsgId": None, "originTopic": "orders",
            "deadLetterTime": None, "deadLetterReason": None, "broker": "broker-a",
            **row,
        })  # fmt: skip
    return pa.RecordBatch.from_pylist(full, schema=ARROW_SCHEMA)


def test_rows_without_a_target_are_not_sent_and_the_rest_keep_their_source() -> None:
    batch = dead_letters([{"originMsgId": "o-0"}, {"originTopic": None}, {"originTopic": "pay"}])
    sent = resend_batch(batch, None, JOB, RESET, REPROCESSED)
    assert tuple(sent.schema.names) == SENT_COLUMNS
    assert sent.to_pylist() == [
        {
            "topic": "orders", "body": b"b-0", "tags": "t", "keys": ["k"],
            "properties": [("number", "0"), (props.ORIGIN_MESSAGE_ID, "o-0"), (REPROCESSED, JOB)],
            "sourceBroker": "broker-a", "sourceQueueId": 0, "sourceQueueOffset": 10,
        },
        {
            "topic": "pay", "body": b"b-2", "tags": "t", "keys": ["k"],
            "properties": [("number", "2"), (props.ORIGIN_MESSAGE_ID, "m-2"), (REPROCESSED, JOB)],
            "sourceBroker": "broker-a", "sourceQueueId": 0, "sourceQueueOffset": 12,
        },
    ]  # fmt: skip


def test_a_target_topic_takes_every_row() -> None:
    batch = dead_letters([{"originTopic": None}, {}])
    sent = resend_batch(batch, "replay", JOB, RESET, REPROCESSED)
    assert sent.column("topic").to_pylist() == ["replay", "replay"]
    assert sent.column("sourceQueueOffset").to_pylist() == [10, 11]
