"""Writing rows to reconsume topics: ``df.write.format("reconsume")`` (batch) and
``df.writeStream.format("reconsume")`` (streaming).

Columns: ``topic`` (string, required), ``body`` (binary or string, required), ``properties``
(map of strings), ``tags`` (string), ``keys`` (array of strings); other columns are ignored.
Each task encodes its rows as messages (reconsume.spark.outgoing), sends them through the
producer, a batch per topic at a time, and reports how many it sent per topic; the commit adds
the tasks' counts up.

Options (names are case-insensitive):

``nameServer``
    name server addresses (required)
``batchSize``, ``batchesInFlight``
    most messages per send request (default 256; a request also stops at 1 MiB of messages),
    and send requests a task has outstanding at once (default 4; with the dead-letter jobs'
    ledger, one entry covers them)
``maxRatePerTask``
    most messages per second each task sends (no limit when absent)
``reportPath``
    a local file the commit writes the counts to, as JSON (streaming: one line per batch)

The dead-letter jobs add ``ledgerJob``, ``ledgerGroup``, ``ledgerResume`` and ``ledgerBrokers``
(see reconsume.spark.sender): rows then carry ``sourceBroker``, ``sourceQueueId`` and
``sourceQueueOffset`` and a re-run sends nothing twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from reconsume.errors import InvalidArgumentError
from reconsume.spark import ledger
from reconsume.spark.offsets import QueueKey
from reconsume.spark.reading import positive_option
from reconsume.spark.sender import Counts, SendOptions, send_batches

_SEPARATORS = re.compile(r"[;,\s]+")
_STRING_MAP = MapType(StringType(), StringType())
_TRACKED = ("sourceBroker", "sourceQueueId", "sourceQueueOffset")


@dataclass(frozen=True)
class TaskCounts(WriterCommitMessage):
    """What one write task sent (``Counts.to_dict()``)."""

    counts: Mapping[str, Any]


def parse_send_options(options: Mapping[str, str]) -> SendOptions:
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    servers = tuple(s for s in _SEPARATORS.split(lowered.get("nameserver", "")) if s)
    if not servers:
        raise InvalidArgumentError("option nameServer (host:port of a name server) is missing")
    batch = positive_option(lowered, "batchsize", 256, int)
    rate = (
        positive_option(lowered, "maxratepertask", 1.0, float)
        if "maxratepertask" in lowered
        else None
    )
    job = lowered.get("ledgerjob")
    resume: dict[QueueKey, ledger.Resume] = {}
    for key, value in json.loads(lowered.get("ledgerresume", "{}")).items():
        resume[QueueKey.parse(key)] = ledger.Resume.from_dict(value)
    brokers = {str(k): str(v) for k, v in json.loads(lowered.get("ledgerbrokers", "{}")).items()}
    if job is not None and not brokers:
        raise InvalidArgumentError("option ledgerBrokers is required with ledgerJob")
    in_flight = positive_option(lowered, "batchesinflight", 4, int)
    return SendOptions(
        servers, batch, rate, job, lowered.get("ledgergroup"), resume, brokers,
        in_flight=in_flight,
    )  # fmt: skip


def check_schema(schema: StructType, *, tracked: bool) -> None:
    """Refuse, before anything is sent, a frame without the columns a send needs."""
    fields = {f.name: f.dataType for f in schema.fields}
    wanted: dict[str, tuple[DataType, ...]] = {
        "topic": (StringType(),),
        "body": (BinaryType(), StringType()),
    }
    optional: dict[str, tuple[DataType, ...]] = {
        "properties": (_STRING_MAP, MapType(StringType(), StringType(), False)),
        "tags": (StringType(),),
        "keys": (ArrayType(StringType()), ArrayType(StringType(), False)),
    }
    if tracked:
        wanted.update(
            sourceBroker=(StringType(),),
            sourceQueueId=(IntegerType(), LongType()),
            sourceQueueOffset=(LongType(), IntegerType()),
        )
    for name in wanted:
        if name not in fields:
            raise InvalidArgumentError(f"the rows to send have no column {name!r}")
    for name, types in {**wanted, **optional}.items():
        if name in fields and fields[name] not in types:
            allowed = " or ".join(t.simpleString() for t in types)
            raise InvalidArgumentError(
                f"column {name!r} is {fields[name].simpleString()}, not {allowed}"
            )


def _task(options: SendOptions, batches: Iterator[pa.RecordBatch]) -> TaskCounts:
    return TaskCounts(send_batches(options, batches).to_dict())


def _totals(messages: Sequence[WriterCommitMessage | None]) -> Counts:
    return Counts.total(m.counts for m in messages if isinstance(m, TaskCounts))


class ReconsumeWriter(DataSourceArrowWriter):
    def __init__(self, options: SendOptions, report: str | None) -> None:
        self.options = options
        self.report = report

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.report is not None:
            Path(self.report).write_text(json.dumps(_totals(messages).to_dict()))


class ReconsumeStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SendOptions, report: str | None) -> None:
        self.options = options
        self.report = report

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.report is not None:
            line = {"batchId": batchId, **_totals(messages).to_dict()}
            with Path(self.report).open("a") as out:
                out.write(json.dumps(line) + "\n")


def writer_of(options: Mapping[str, str], schema: StructType) -> tuple[SendOptions, str | None]:
    """Parsed options and the report path; the schema checked against them."""
    send = parse_send_options(options)
    check_schema(schema, tracked=send.job is not None)
    report = {str(k).lower(): str(v) for k, v in options.items()}.get("reportpath")
    return send, report


def tracked_columns() -> tuple[str, ...]:
    """The columns naming the dead letter a row comes from (ledger mode)."""
    return _TRACKED
