"""Offsets of a Spark read: where each broker queue of a topic starts and ends.

Options ``startingOffsets`` and ``endingOffsets`` take the JSON shape of Spark's Kafka source,
one object per topic whose keys name a broker queue as ``"<brokerName>:<queueId>"``::

    {"orders": {"broker-a:0": 42, "broker-a:1": -2, "broker-b:0": -1}}

An offset is a queue offset (the n-th message of that queue), or ``-2`` for the queue's earliest
offset or ``-1`` for its latest (the offset the next message will get). The words ``"earliest"``
and ``"latest"`` stand for every queue at -2 or -1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconsume.errors import InvalidArgumentError

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """One queue of a topic on one broker, written ``"<brokerName>:<queueId>"``."""

    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.broker}:{self.queue_id}"

    @classmethod
    def parse(cls, text: str) -> QueueKey:
        broker, sep, queue_id = text.rpartition(":")
        if not sep or not broker or not queue_id.isdigit():
            raise InvalidArgumentError(f"queue {text!r} is not <brokerName>:<queueId>")
        return cls(broker, int(queue_id))


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    """An offset per queue of one topic (queue offsets, or EARLIEST / LATEST)."""

    topic: str
    offsets: tuple[tuple[QueueKey, int], ...]
    """Sorted by queue; one entry per queue."""

    @classmethod
    def of(cls, topic: str, offsets: Mapping[QueueKey, int]) -> TopicOffsets:
        for key, offset in offsets.items():
            if offset < EARLIEST:
                raise InvalidArgumentError(f"offset {offset} of {topic} {key} is below -2")
        return cls(topic, tuple(sorted(offsets.items())))

    def as_mapping(self) -> dict[QueueKey, int]:
        return dict(self.offsets)

    def get(self, key: QueueKey, default: int) -> int:
        return self.as_mapping().get(key, default)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {self.topic: {str(key): offset for key, offset in self.offsets}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], topic: str) -> TopicOffsets:
        """The offsets of ``topic`` in ``data`` (Kafka source shape); naming another topic is
        an error, since a read covers one topic."""
        others = sorted(set(data) - {topic})
        if others:
            raise InvalidArgumentError(f"offsets name {others}, but the read is of {topic!r}")
        queues = data.get(topic) or {}
        if not isinstance(queues, Mapping):
            raise InvalidArgumentError(f"offsets of {topic!r} must be an object")
        parsed: dict[QueueKey, int] = {}
        for name, offset in queues.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InvalidArgumentError(f"offset of {topic} {name} must be an integer")
            parsed[QueueKey.parse(str(name))] = offset
        return cls.of(topic, parsed)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def parse_option(cls, text: str, topic: str) -> TopicOffsets | int:
        """An option's value: ``"earliest"`` / ``"latest"`` (EARLIEST / LATEST for every
        queue) or the JSON object."""
        word = text.strip().lower()
        if word == "earliest":
            return EARLIEST
        if word == "latest":
            return LATEST
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(
                f"offsets {text!r} are neither earliest, latest nor JSON: {exc}"
            ) from exc
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"offsets {text!r} must be a JSON object")
        return cls.from_dict(data, topic)


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Messages ``start`` (inclusive) to ``end`` (exclusive) of one queue, and the address of
    the broker holding it: what one input partition reads."""

    topic: str
    broker: str
    queue_id: int
    address: str
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return QueueKey(self.broker, self.queue_id)

    def __len__(self) -> int:
        return max(0, self.end - self.start)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "broker": self.broker,
            "queueId": self.queue_id,
            "address": self.address,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueueRange:
        return cls(
            str(data["topic"]),
            str(data["broker"]),
            int(data["queueId"]),
            str(data["address"]),
            int(data["start"]),
            int(data["end"]),
        )


def ends_of(ranges: list[QueueRange]) -> TopicOffsets | None:
    """The end offsets of ``ranges`` (all of one topic) in the options' shape."""
    if not ranges:
        return None
    return TopicOffsets.of(ranges[0].topic, {r.key: r.end for r in ranges})
