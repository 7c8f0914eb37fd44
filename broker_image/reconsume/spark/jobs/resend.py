"""A Reprocess without a filter: Spark tasks that read their queue range and send it in one
pass, on one event loop.

With no filter there is no condition for Spark SQL to evaluate: every dead letter with a target
is re-sent. Through the data source and the writer, each dead letter crossed from the reading
Python worker to the JVM as Arrow, became a row there, had its properties reset by Spark's map
functions and crossed back as Arrow to the writing Python worker: 12 to 13 µs of JVM CPU a
message of the ~43 a reprocess cost on ``local[2]`` (bench/RESULTS.md). Here a task pulls its range
(:func:`reconsume.spark.reading.range_batches`), resets each record batch with Arrow kernels
(:func:`resend_batch`) and hands the batches to the writer's own sender
(:class:`reconsume.spark.sender.TaskSender`, ledger mode) on the same event loop, so pulls and
sends overlap: the ledger, the resume points, the rate limit and the counts are the writer's,
and Spark still places the tasks (one a queue range) on its executors. A filtered Reprocess
keeps the DataFrame path: its filter is Spark SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from reconsume.message import properties as props
from reconsume.spark.offsets import QueueRange
from reconsume.spark.reading import ReadOptions, plan_ranges, range_batches
from reconsume.spark.sender import Counts, SendOptions, TaskSender
from reconsume.spark.writer import parse_send_options, tracked_columns

SENT_COLUMNS = ("topic", "body", "properties", "tags", "keys", *tracked_columns())
"""The columns of a batch :func:`resend_batch` makes: what the writer takes in ledger mode."""


def reset_properties(
    properties: pa.MapArray, origin_ids: pa.Array, job: str, reset: Iterable[str], marker: str
) -> pa.MapArray:
    """Each row's properties without the names in ``reset``, then ORIGIN_MESSAGE_ID (the
    row's ``origin_ids`` value) and ``marker`` (``job``): what ``frames.sends`` computes with
    Spark's ``map_filter`` and ``map_concat``, with Arrow kernels over the whole batch. A null
    map counts as empty."""
    count = len(properties)
    offsets = properties.offsets
    start = offsets[0].as_py()
    size = offsets[-1].as_py() - start
    names = properties.keys.slice(start, size)
    values = properties.items.slice(start, size)
    # the row of each entry (list_parent_indices of the map's offsets over its names)
    rows = pc.list_parent_indices(pa.ListArray.from_arrays(offsets, properties.keys))
    keep = pc.and_(
        pc.invert(pc.fill_null(pc.is_in(names, value_set=pa.array(sorted(reset))), False)),
        pc.take(properties.is_valid(), rows),
    )
    each_row = pa.array(range(count), pa.int64())
    # kept entries first, the two new ones after them; a stable sort by row puts each row's
    # entries together in that order
    entry_rows = pa.concat_arrays([rows.filter(keep).cast(pa.int64()), each_row, each_row])
    order = pc.sort_indices(entry_rows)
    new_names = pa.concat_arrays([
        names.filter(keep).cast(pa.string()),
        pa.repeat(pa.scalar(props.ORIGIN_MESSAGE_ID, pa.string()), count),
        pa.repeat(pa.scalar(marker, pa.string()), count),
    ]).take(order)  # fmt: skip
    new_values = pa.concat_arrays([
        values.filter(keep).cast(pa.string()),
        origin_ids.cast(pa.string()),
        pa.repeat(pa.scalar(job, pa.string()), count),
    ]).take(order)  # fmt: skip
    kept_before = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(keep.cast(pa.int64()))]
    )
    kept_offsets = pc.take(kept_before, pc.subtract(offsets.cast(pa.int64()), start))
    row_offsets = pa.array(range(0, 2 * count + 1, 2), pa.int64())
    new_offsets = pc.add(kept_offsets, row_offsets).cast(pa.int32())
    return pa.MapArray.from_arrays(new_offsets, new_names, new_values)


def resend_batch(
    batch: pa.RecordBatch,
    target_topic: str | None,
    job: str,
    reset: Iterable[str],
    marker: str,
) -> pa.RecordBatch:
    """The rows of a read's ``batch`` that a Reprocess sends — those with a target: the job's
    ``target_topic``, else their origin topic — with their retry state reset, as the writer
    takes them (:data:`SENT_COLUMNS`)."""
    if target_topic is None:
        origin = batch.column("originTopic")
        if origin.null_count:
            batch = batch.filter(origin.is_valid())
        topic = batch.column("originTopic")
    else:
        topic = pa.repeat(pa.scalar(target_topic, pa.string()), batch.num_rows)
    origin_ids = pc.coalesce(batch.column("originMsgId"), batch.column("msgId"))
    properties = reset_properties(batch.column("properties"), origin_ids, job, reset, marker)
    columns = [
        topic, batch.column("body"), properties, batch.column("tags"), batch.column("keys"),
        batch.column("broker"), batch.column("queueId"), batch.column("queueOffset"),
    ]  # fmt: skip
    return pa.RecordBatch.from_arrays(columns, names=list(SENT_COLUMNS))


async def _resend_range(
    read: ReadOptions,
    send: SendOptions,
    queue_range: QueueRange,
    rebuild: functools.partial[pa.RecordBatch],
) -> dict[str, Any]:
    """Read ``queue_range`` and send what it holds; the rows read and the sender's counts."""
    read_rows = 0

    async def resent() -> AsyncGenerator[pa.RecordBatch, None]:
        nonlocal read_rows
        batches = range_batches(queue_range, read, skip=read.skip.get(queue_range.key, ()))
        async with contextlib.aclosing(batches):
            async for batch in batches:
                read_rows += batch.num_rows
                yield rebuild(batch)

    sender = TaskSender(send)
    try:
        async with contextlib.aclosing(resent()) as stream:
            counts = await sender.send(stream)
    finally:
        await sender.close()
    return {"read": read_rows, **counts.to_dict()}


def _task(
    read: ReadOptions,
    send: SendOptions,
    rebuild: functools.partial[pa.RecordBatch],
    ranges: Iterable[Mapping[str, Any]],
) -> Iterator[dict[str, Any]]:
    """One Spark task: each of its queue ranges read and sent."""
    for data in ranges:
        yield asyncio.run(_resend_range(read, send, QueueRange.from_dict(data), rebuild))


def resend(
    spark: SparkSession,
    read_options: Mapping[str, str],
    send_options: Mapping[str, str],
    *,
    target_topic: str | None,
    job: str,
    reset: Iterable[str],
    marker: str,
) -> tuple[int, Counts]:
    """Re-send every dead letter the data source's ``read_options`` name, a Spark task a
    non-empty queue range, through the writer's ``send_options`` (ledger mode); the rows read
    and what was sent or skipped."""
    read = ReadOptions.parse(read_options)
    send = parse_send_options(send_options)
    ranges = [r.to_dict() for r in asyncio.run(plan_ranges(read)) if len(r) > 0]
    if not ranges:
        return 0, Counts()
    rebuild = functools.partial(
        resend_batch, target_topic=target_topic, job=job, reset=tuple(reset), marker=marker
    )
    task = functools.partial(_task, read, send, rebuild)
    parts = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(task).collect()
    return sum(int(part["read"]) for part in parts), Counts.total(parts)
