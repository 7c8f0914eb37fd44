"""The Spark side of a dead-letter job: the frame of a run's dead letters, the filter, what
is archived or re-sent, and the ranges of what a filtered run handled."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.offset_ranges import Range, merge
from reconsume.spark.jobs.params import JobParams
from reconsume.spark.jobs.scope import Scope
from reconsume.spark.ledger import Resume
from reconsume.spark.offsets import QueueKey
from reconsume.spark.schema import SCHEMA
from reconsume.spark.sender import Counts
from reconsume.spark.source import NAME

MATCHED = "_matched"
ARCHIVE_RUN = "archiveRun"
"""Column of the archive naming the run that wrote each row."""
DEAD_LETTER_DATE = "deadLetterDate"
CONCURRENT_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"
ARCHIVE_WRITERS = 4
"""Partition writers a drain task keeps open (one a dead-letter date) instead of sorting."""
REPROCESSED = "RECONSUME_REPROCESSED"
"""Property of a re-sent dead letter: the job that re-sent it."""
RESET = (
    props.RECONSUME_TIME,
    props.MAX_RECONSUME_TIMES,
    props.RETRY_TOPIC,
    props.DLQ_ORIGIN_TOPIC,
    props.DLQ_ORIGIN_MESSAGE_ID,
    props.DLQ_TIME_MS,
    props.DLQ_REASON,
    props.DELAY_TIME_LEVEL,
    props.REAL_TOPIC,
    props.REAL_QUEUE_ID,
    props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    props.ORIGIN_MESSAGE_ID,
    REPROCESSED,
)
"""Properties a re-sent message loses: the retry state starts again."""


class InvalidFilterError(InvalidArgumentError):
    """The filter does not parse, names unknown columns or is not a condition."""


def read_options(params: JobParams, scope: Scope) -> dict[str, str]:
    """The ``reconsume`` data source's options that read the run's dead letters."""
    return {
        "nameServer": ";".join(params.name_servers),
        "deadLetterGroup": params.group,
        "group": params.group,
        "startingOffsets": scope.starting().to_json(),
        "endingOffsets": scope.ending().to_json(),
        "skipOffsets": scope.skip_json(),
        "timeoutSeconds": str(params.timeout_s),
    }


def dead_letters(spark: SparkSession, params: JobParams, scope: Scope) -> DataFrame:
    """The dead letters of the run, with the filter's verdict in column ``_matched``."""
    frame = spark.read.format(NAME).options(**read_options(params, scope)).load()
    return frame.withColumn(MATCHED, matched(frame, params.filter))


def matched(frame: DataFrame, condition: str | None) -> Column:
    """The filter as a column (true for every row without one); refuses a filter that does
    not parse, names unknown columns or is not a boolean condition."""
    if condition is None:
        return F.lit(True)
    try:
        column = F.expr(condition)
        kind = frame.select(column.alias("m")).schema["m"].dataType
    except (ParseException, AnalysisException) as exc:
        raise InvalidFilterError(f"filter {condition!r}: {_first_line(exc)}") from exc
    if not isinstance(kind, BooleanType):
        raise InvalidFilterError(
            f"filter {condition!r} is {kind.simpleString()}, not a boolean condition"
        )
    return F.coalesce(column, F.lit(False))


def check_filter(spark: SparkSession, condition: str) -> None:
    """Refuse a bad filter without reading anything (checked against the schema)."""
    matched(spark.createDataFrame([], SCHEMA), condition)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def observed(frame: DataFrame, name: str) -> tuple[DataFrame, Observation]:
    """``frame`` counting its rows (read) and the filter's matches as an action runs."""
    observation = Observation(name)
    counted = frame.observe(
        observation,
        F.count(F.lit(1)).alias("read"),
        F.sum(F.when(F.col(MATCHED), 1).otherwise(0)).alias("matched"),
    )
    return counted, observation


def counts_of(observation: Observation) -> tuple[int, int]:
    values = observation.get
    return int(values.get("read") or 0), int(values.get("matched") or 0)


def count_only(frame: DataFrame) -> tuple[int, int]:
    """(read, matched) of ``frame`` without doing anything else."""
    row = frame.agg(
        F.count(F.lit(1)).alias("read"),
        F.sum(F.when(F.col(MATCHED), 1).otherwise(0)).alias("matched"),
    ).first()
    assert row is not None
    return int(row["read"] or 0), int(row["matched"] or 0)


def archive_rows(frame: DataFrame, run: str) -> DataFrame:
    """The matched dead letters as archived: every column of the schema, the run, and the
    dead-letter date (store date when the message has no dead-letter time) to partition by."""
    return (
        frame.where(F.col(MATCHED))
        .drop(MATCHED)
        .withColumn(ARCHIVE_RUN, F.lit(run))
        .withColumn(
            DEAD_LETTER_DATE,
            F.to_date(F.coalesce(F.col("deadLetterTime"), F.col("storeTimestamp"))),
        )
    )


def write_archive(frame: DataFrame, run: str, params: JobParams) -> None:
    """Append ``archive_rows`` of ``frame`` to the job's sink, partitioned by dead-letter date,
    with up to ``ARCHIVE_WRITERS`` partition writers open in each task (unless the job's own
    ``--conf`` sets them): Spark otherwise sorts every row by its date before writing, which
    took a fifth of the drain's JVM time and spilled to disk (bench/RESULTS.md); past that many
    dates in a task it falls back to sorting."""
    spark = frame.sparkSession
    writer = (
        archive_rows(frame, run)
        .write.mode("append")
        .partitionBy(DEAD_LETTER_DATE)
        .format(params.sink_format)
    )
    path = params.sink_path
    if any(key == CONCURRENT_WRITERS for key, _ in params.conf):
        writer.save(path)
        return
    previous = spark.conf.get(CONCURRENT_WRITERS)
    spark.conf.set(CONCURRENT_WRITERS, ARCHIVE_WRITERS)
    try:
        writer.save(path)
    finally:
        if previous is None:
            spark.conf.unset(CONCURRENT_WRITERS)
        else:
            spark.conf.set(CONCURRENT_WRITERS, previous)


def resent(params: JobParams) -> Column:
    """The dead letters a Reprocess sends: matched, with a target (the job's, or their origin
    topic). The others stay where they are."""
    target = F.lit(params.target_topic) if params.target_topic else F.col("originTopic")
    return F.col(MATCHED) & target.isNotNull()


def sends(frame: DataFrame, params: JobParams) -> DataFrame:
    """The messages a Reprocess sends: the ``resent`` dead letters, to the target or their
    origin topic, with the retry state reset."""
    target = F.lit(params.target_topic) if params.target_topic else F.col("originTopic")
    reset = F.map_concat(
        F.map_filter("properties", lambda k, _: ~k.isin(*RESET)),
        F.create_map(
            F.lit(props.ORIGIN_MESSAGE_ID),
            F.coalesce(F.col("originMsgId"), F.col("msgId")),
            F.lit(REPROCESSED),
            F.lit(params.job),
        ),
    )
    return frame.where(resent(params)).select(
        target.alias("topic"),
        F.col("body"),
        reset.alias("properties"),
        F.col("tags"),
        F.col("keys"),
        F.col("broker").alias("sourceBroker"),
        F.col("queueId").alias("sourceQueueId"),
        F.col("queueOffset").alias("sourceQueueOffset"),
    )


def handled_ranges(frame: DataFrame, condition: Column) -> dict[QueueKey, list[Range]]:
    """Per queue, the runs of consecutive offsets of the rows ``condition`` holds for, as
    ranges: what a filtered run acknowledges. One pass over ``frame`` (the rows' offsets
    minus their rank within the queue is constant along a run)."""
    queue = Window.partitionBy("broker", "queueId").orderBy("queueOffset")
    rows = (
        frame.where(condition)
        .select("broker", "queueId", "queueOffset")
        .withColumn("_run", F.col("queueOffset") - F.row_number().over(queue))
        .groupBy("broker", "queueId", "_run")
        .agg(F.min("queueOffset").alias("first"), F.max("queueOffset").alias("last"))
        .collect()
    )
    ranges: dict[QueueKey, list[Range]] = {}
    for row in rows:
        key = QueueKey(str(row["broker"]), int(row["queueId"]))
        ranges.setdefault(key, []).append((int(row["first"]), int(row["last"]) + 1))
    return {key: merge((), found) for key, found in ranges.items()}


def send_options(
    params: JobParams,
    scope: Scope,
    resume: Mapping[QueueKey, Resume],
    parallelism: int,
) -> dict[str, str]:
    """The ``reconsume`` writer's options that re-send a run's dead letters in ledger mode."""
    options = {
        "nameServer": ";".join(params.name_servers),
        "ledgerJob": params.job,
        "ledgerGroup": params.group,
        "ledgerBrokers": json.dumps(scope.brokers),
        "ledgerResume": json.dumps({str(k): v.to_dict() for k, v in resume.items()}),
    }
    if params.rate_per_second is not None:
        busy = max(1, min(parallelism, sum(1 for q in scope.queues if len(q) > 0)))
        options["maxRatePerTask"] = str(params.rate_per_second / busy)
    return options


def write_sends(
    frame: DataFrame,
    params: JobParams,
    scope: Scope,
    resume: Mapping[QueueKey, Resume],
    report: str,
    parallelism: int,
) -> Counts:
    """Send ``frame`` (see ``sends``) through the ``reconsume`` writer in ledger mode."""
    options = send_options(params, scope, resume, parallelism)
    frame.write.format(NAME).mode("append").options(**options, reportPath=report).save()
    with open(report) as source:
        data: dict[str, Any] = json.load(source)
    return Counts.total([data])
