"""Offsets of Spark reads in the JSON shape of Spark's Kafka source."""

from __future__ import annotations

import json

import pytest

from reconsume.errors import InvalidArgumentError
from reconsume.spark.offsets import (
    EARLIEST,
    LATEST,
    QueueKey,
    QueueRange,
    TopicOffsets,
    ends_of,
)


def test_topic_offsets_round_trip_through_the_kafka_shape() -> None:
    offsets = TopicOffsets.of("orders", {QueueKey("broker-b", 0): LATEST, QueueKey("a:x", 3): 7})
    data = offsets.to_dict()
    assert data == {"orders": {"a:x:3": 7, "broker-b:0": -1}}
    assert TopicOffsets.from_dict(data, "orders") == offsets
    assert TopicOffsets.parse_option(offsets.to_json(), "orders") == offsets
    assert offsets.get(QueueKey("broker-b", 1), EARLIEST) == EARLIEST


def test_words_stand_for_every_queue() -> None:
    assert TopicOffsets.parse_option(" Earliest ", "t") == EARLIEST
    assert TopicOffsets.parse_option("latest", "t") == LATEST


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"other": {"b:0": 1}}', "the read is of 't'"),
        ('{"t": {"b0": 1}}', "not <brokerName>:<queueId>"),
        ('{"t": {"b:0": "1"}}', "must be an integer"),
        ('{"t": {"b:0": -3}}', "below -2"),
        ('{"t": [1]}', "must be an object"),
        ("[1]", "must be a JSON object"),
        ("soon", "neither earliest, latest nor JSON"),
    ],
)
def test_bad_offsets_are_refused(text: str, error: str) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        TopicOffsets.parse_option(text, "t")


def test_a_queue_range_round_trips_and_counts_its_messages() -> None:
    queue_range = QueueRange("t", "broker-a", 1, "127.0.0.1:10911", 4, 9)
    assert QueueRange.from_dict(json.loads(json.dumps(queue_range.to_dict()))) == queue_range
    assert len(queue_range) == 5
    assert len(QueueRange("t", "b", 0, "h:1", 9, 4)) == 0
    ends = ends_of([queue_range, QueueRange("t", "broker-b", 0, "h:1", 0, 2)])
    assert ends is not None
    assert ends.to_dict() == {"t": {"broker-a:1": 9, "broker-b:0": 2}}
    assert ends_of([]) is None
