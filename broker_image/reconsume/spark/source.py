"""The ``reconsume`` Python data source: a batch read of a topic or a group's dead letters.

Options (names are case-insensitive):

``nameServer``
    name server addresses, ``host:port``, separated by ``;`` or ``,`` (required)
``topic`` / ``deadLetterGroup``
    the topic to read, or the consumer group whose ``%DLQ%<group>`` to read (exactly one)
``startingOffsets`` / ``endingOffsets``
    ``earliest``, ``latest`` or JSON per broker queue (see reconsume.spark.offsets); defaults
    ``earliest`` and ``latest``. A queue the JSON leaves out starts at its earliest offset and
    ends at its latest; an offset below a queue's earliest reads from its earliest, and an end
    beyond the latest stops at the latest.
``group``
    the consumer group named in pulls (default ``reconsume-spark``; nothing is committed)
``skipOffsets``
    ``{"<brokerName>:<queueId>": [[start, end], ...]}``: queue offsets left out (end excluded),
    e.g. what dead-letter jobs acknowledged past their committed offset
``pullBatchSize``, ``pullsInFlight``, ``timeoutSeconds``
    messages per pull (default 256; reconsume's brokers hand a reader up to 1,024 in one, Apache
    RocketMQ's 32), pulls a partition keeps outstanding (default 4) and the timeout of each
    broker request (default 10)

``spark.readStream`` takes the same options but ``endingOffsets``, starts at ``latest`` by
default, and takes ``maxMessagesPerTrigger`` (see reconsume.spark.stream).

The end offsets are resolved once, on the driver, when the read is planned: a read has a
defined scope however many messages arrive while it runs. Each non-empty queue range becomes
one input partition, which pulls its range from the queue's broker and yields it as Arrow
record batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from reconsume.spark.offsets import QueueRange
from reconsume.spark.reading import QueueRangePartition, ReadOptions, plan_ranges, read_range
from reconsume.spark.schema import SCHEMA
from reconsume.spark.stream import ReconsumeStreamReader
from reconsume.spark.writer import ReconsumeStreamWriter, ReconsumeWriter, writer_of

NAME = "reconsume"


class ReconsumeReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.ranges: Sequence[QueueRange] = asyncio.run(plan_ranges(options))

    def partitions(self) -> Sequence[InputPartition]:
        return [QueueRangePartition(r) for r in self.ranges if len(r) > 0]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition is None or partition.value is None:
            return iter(())  # what Spark reads when partitions() found nothing to read
        queue_range = QueueRange.from_dict(partition.value)
        return read_range(
            queue_range, self.options, skip=self.options.skip.get(queue_range.key, ())
        )


class ReconsumeDataSource(DataSource):
    """Register with ``spark.dataSource.register(ReconsumeDataSource)``; read with
    ``spark.read.format("reconsume")`` or ``spark.readStream.format("reconsume")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ReconsumeReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ReconsumeStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return ReconsumeWriter(*writer_of(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return ReconsumeStreamWriter(*writer_of(self.options, schema))
