"""Streaming reads of the ``reconsume`` data source: ``spark.readStream.format("reconsume")``
(PySpark 4.2 or newer: read limits and Trigger.AvailableNow for Python data sources).

The options are the batch read's (see reconsume.spark.source) with three differences:

``startingOffsets``
    where a new query starts: ``latest`` (the default, as in Spark's Kafka source),
    ``earliest`` or JSON per broker queue. A query restarted from its checkpoint goes on from
    the checkpointed offsets and ignores this option.
``endingOffsets``
    not allowed: a stream reads on as messages arrive.
``maxMessagesPerTrigger``
    at most this many messages per micro-batch, over all queues (default: no limit). The
    batch is shared out in proportion to each queue's backlog, and every queue with a backlog
    gets at least one message while the limit allows; below that the largest backlogs go
    first. ``Trigger.AvailableNow`` respects it too, in as many batches as it takes.

A stream's offsets are those of the options, ``{"<topic>": {"<broker>:<queueId>": offset}}``,
an offset being the next message to read. A queue that appears while the query runs (the topic
expanded, a dead-letter queue created by its first dead letter) is read from its earliest
offset. An offset below a queue's earliest (messages deleted) reads on from the earliest.
Nothing is committed to the brokers: the progress lives in the query's checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from reconsume.errors import InvalidArgumentError
from reconsume.spark.offsets import EARLIEST, LATEST, QueueKey, QueueRange, TopicOffsets
from reconsume.spark.reading import QueueRangePartition, ReadOptions, plan_ranges, read_range


def admit(backlogs: Mapping[QueueKey, int], limit: int) -> dict[QueueKey, int]:
    """How many messages a micro-batch of at most ``limit`` takes from each queue, given what
    each has waiting: all of it when it fits; else one per queue with a backlog and the rest
    in proportion to the backlogs beyond that one (largest remainders first, then queue
    order); and when ``limit`` is below the number of queues waiting, one from each of the
    ``limit`` largest backlogs. Queues that get nothing are left out."""
    waiting = {key: backlog for key, backlog in backlogs.items() if backlog > 0}
    total = sum(waiting.values())
    if total <= limit:
        return waiting
    if limit < len(waiting):
        largest = sorted(waiting, key=lambda key: (-waiting[key], key))[:limit]
        return dict.fromkeys(largest, 1)
    spare = limit - len(waiting)
    beyond = total - len(waiting)  # more than spare, since total > limit
    shares = {key: 1 + spare * (backlog - 1) // beyond for key, backlog in waiting.items()}
    left = limit - sum(shares.values())
    by_remainder = sorted(waiting, key=lambda key: (-(spare * (waiting[key] - 1) % beyond), key))
    for key in by_remainder[:left]:
        shares[key] += 1
    return shares


def _begin(offset: int | None, low: int) -> int:
    """Where a queue's next read starts: its offset, or its earliest when that is later or the
    queue is new to the stream."""
    return low if offset is None else max(offset, low)


def next_offsets(
    start: TopicOffsets,
    available: Sequence[QueueRange],
    *,
    limit: int | None = None,
    target: TopicOffsets | None = None,
) -> TopicOffsets:
    """The end offsets of the next micro-batch from ``start``: each queue of ``available``
    (its earliest to latest offset now) read up to its latest, or to ``target`` if given (a
    queue ``target`` lacks has nothing to read), within ``limit`` messages in all. A queue new
    to the stream joins at its earliest offset; a queue without progress keeps its start, and so
    does one of ``start`` no longer available."""
    starts = start.as_mapping()
    caps = None if target is None else target.as_mapping()
    begins: dict[QueueKey, int] = {}
    backlogs: dict[QueueKey, int] = {}
    for queue in available:
        begin = begins[queue.key] = _begin(starts.get(queue.key), queue.start)
        high = queue.end if caps is None else min(queue.end, caps.get(queue.key, begin))
        backlogs[queue.key] = max(0, high - begin)
    taken = backlogs if limit is None else admit(backlogs, limit)
    ends = dict(starts)
    for key, begin in begins.items():
        if taken.get(key, 0) > 0:
            ends[key] = begin + taken[key]
        else:
            ends.setdefault(key, begin)
    return TopicOffsets.of(start.topic, ends)


def plan_batch(
    start: TopicOffsets, end: TopicOffsets, available: Sequence[QueueRange]
) -> list[QueueRange]:
    """The non-empty queue ranges of the micro-batch from ``start`` to ``end``, addressed with
    ``available`` (each queue's broker and earliest offset now), in queue order."""
    starts = start.as_mapping()
    by_key = {queue.key: queue for queue in available}
    ranges: list[QueueRange] = []
    for key, stop in end.offsets:
        offset = starts.get(key)
        queue = by_key.get(key)
        if queue is None:
            if offset is None or stop > offset:
                raise InvalidArgumentError(f"{end.topic} queue {key} to read is not routed now")
            continue
        begin = _begin(offset, queue.start)
        if stop > begin:
            ranges.append(replace(queue, start=begin, end=stop))
    return ranges


class ReconsumeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The micro-batch reader; each method that needs the queues asks the name server and the
    brokers afresh (no connection outlives a call)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.target: TopicOffsets | None = None
        """The latest offsets when Trigger.AvailableNow began: the query ends there."""
        self.latest: TopicOffsets | None = None
        """The latest offsets seen by the last latestOffset(), for the query's progress."""

    def _offsets(self, data: Mapping[str, Any]) -> TopicOffsets:
        return TopicOffsets.from_dict(data, self.options.topic)

    def _available(self) -> list[QueueRange]:
        """Every readable queue, from its earliest to its latest offset."""
        return asyncio.run(plan_ranges(replace(self.options, starting=EARLIEST, ending=LATEST)))

    def _latest_of(self, available: Sequence[QueueRange]) -> TopicOffsets:
        return TopicOffsets.of(self.options.topic, {queue.key: queue.end for queue in available})

    def initialOffset(self) -> dict[str, Any]:
        ranges = asyncio.run(plan_ranges(replace(self.options, ending=LATEST)))
        return TopicOffsets.of(self.options.topic, {r.key: r.start for r in ranges}).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest_of(self._available())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        available = self._available()
        self.latest = self._latest_of(available)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = next_offsets(self._offsets(start), available, limit=max_rows, target=self.target)
        return end.to_dict()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self.latest is None else self.latest.to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = self._offsets(start), self._offsets(end)
        if begin == stop:
            return []
        return [QueueRangePartition(r) for r in plan_batch(begin, stop, self._available())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition is None or partition.value is None:
            return iter(())
        return read_range(QueueRange.from_dict(partition.value), self.options)
