"""``reconsume dlq drain|reprocess|purge``: one run of a dead-letter job on Spark.

The run's scope is fixed first (see scope.py); then, for

Drain
    the matched dead letters are written to the archive (partitioned by dead-letter date, each
    row naming its run), an ``archived`` ledger entry records the committed archive, and only
    then are they marked handled. A re-run after a crash finishes a committed archive instead
    of writing it again.
Reprocess
    matched dead letters are sent to the target (or origin) topic with their retry state reset;
    the ledger makes a re-run send nothing twice; then they are marked handled.
Purge
    the matched dead letters are marked handled without being read further: discarded.

Marking handled: without a filter the jobs' committed offsets move to the scope's end; with
one, the handled dead letters' offsets are acknowledged past it (``scope.acknowledge``) and
the others — kept — stay where they are, with their ids, counted in the dead-letter depth and
read again by the next run. Nothing is sent back, so a filtered run never raises the depth.

Runs under spark-submit too: ``spark-submit .../reconsume/spark/jobs/main.py drain ...``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from reconsume.client.admin import AdminClient
from reconsume.errors import (
    InvalidArgumentError,
    ReconsumeError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from reconsume.message.offset_ranges import Range
from reconsume.spark import ledger
from reconsume.spark.jobs import frames, resend
from reconsume.spark.jobs.params import Action, JobParams, parse
from reconsume.spark.jobs.result import Result, now, publish
from reconsume.spark.jobs.scope import (
    Scope,
    UnknownGroupError,
    acknowledge,
    ledger_entries,
    mark_handled,
    plan,
)
from reconsume.spark.offsets import QueueKey
from reconsume.spark.source import ReconsumeDataSource

SETTLE_S = 15.0
"""Quiet time after a failed attempt's last ledger entry before a re-run looks at what it sent:
a send's worst case (3 s timeout, 3 tries) with room to spare."""
MAX_SETTLE_ROUNDS = 4


class SinkNotWritableError(ReconsumeError):
    """The archive's directory cannot be written."""


class ConcurrentRunError(ReconsumeError):
    """Another attempt of the same job is writing to the ledger."""


def session(params: JobParams) -> SparkSession:
    """The job's SparkSession (the Python workers run this interpreter)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(params.master)
        .appName(f"reconsume-dlq-{params.action.value.lower()}-{params.group}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in params.conf:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(ReconsumeDataSource)
    return spark


class Run:
    """One run: the parameters, the session (started when first needed) and the result."""

    def __init__(self, params: JobParams, spark: SparkSession | None = None) -> None:
        self.params = params
        self._spark = spark
        self.counts = dict.fromkeys(("read", "matched", "archived", "resent", "purged",
                                     "kept", "skipped"), 0)  # fmt: skip
        self.work = Path(os.environ.get("TMPDIR", "/tmp")) / f"reconsume-dlq-{uuid.uuid4().hex}"

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = session(self.params)
        return self._spark

    def admin(self) -> AdminClient:
        return AdminClient(self.params.name_servers, timeout_s=self.params.timeout_s)

    async def _plan(self) -> tuple[Scope, list[ledger.Entry]]:
        """The scope and the ledger entries of unfinished attempts, once those attempts are
        quiet: a failed attempt's sends can land after it died (a request in flight, a Python
        worker that outlives its driver for a moment), and a re-run that looked for them
        before they landed would send them again. So when an attempt of this job wrote to the
        ledger within ``settle_s``, the run waits ``settle_s`` and reads again, until a wait
        brings nothing new; an attempt that keeps writing is another run of the job, refused."""
        job = self.params.job
        seen: tuple[int, int | None] | None = None
        async with self.admin() as admin:
            waited = 0.0
            while True:
                scope = await plan(admin, self.params.group,
                                   max_messages=self.params.max_messages,
                                   prepare_ledger=not self.params.dry_run)  # fmt: skip
                entries = await ledger_entries(admin, scope)
                settle_s = self.settle_s(len(scope.queues))
                last = ledger.last_written_ms(entries, job)
                mark = (sum(1 for e in entries if e.job == job), last)
                if self.params.dry_run or last is None or (waited > 0 and mark == seen):
                    return scope, entries
                age_s = time.time() - last / 1000
                if waited == 0 and age_s >= settle_s:
                    return scope, entries
                if waited >= MAX_SETTLE_ROUNDS * settle_s:
                    raise ConcurrentRunError(
                        f"job {job}: another attempt wrote to the ledger of {scope.group} "
                        f"{max(age_s, 0):.0f} s ago after {waited:.0f} s of waiting; "
                        "two runs of one job must not overlap"
                    )
                print(f"job {job}: an earlier attempt wrote to the ledger {max(age_s, 0):.1f} s "
                      f"ago; waiting {settle_s:.0f} s for its sends in flight",
                      file=sys.stderr, flush=True)  # fmt: skip
                seen = mark
                await asyncio.sleep(settle_s)
                waited += settle_s

    def settle_s(self, queues: int) -> float:
        """How long an attempt must have been quiet: longer than a send can take (its timeout
        times its tries) and than a task's pause between two batches under the rate limit (a
        task sends at least ``rate / queues`` a second, a batch at least every 0.1 s)."""
        pause_s = 0.0
        if self.params.rate_per_second is not None:
            pause_s = max(0.1, max(queues, 1) / self.params.rate_per_second)
        return max(SETTLE_S, 3 * pause_s)

    async def _handled(self, scope: Scope) -> None:
        async with self.admin() as admin:
            await mark_handled(admin, scope)

    async def _acknowledge(self, scope: Scope, handled: dict[QueueKey, list[Range]]) -> None:
        async with self.admin() as admin:
            await acknowledge(admin, scope, handled)

    async def _append(self, scope: Scope, entry: ledger.Entry) -> None:
        from reconsume.client.producer import Producer

        async with Producer(self.params.name_servers, "reconsume-dlq-jobs") as producer:
            await ledger.append(producer, scope.brokers[entry.queue.broker], entry.queue.broker,
                                entry)  # fmt: skip

    def execute(self) -> tuple[Scope, Scope]:
        """Do the run; returns the scope planned and the scope finally handled."""
        planned, entries = asyncio.run(self._plan())
        scope = planned
        if self.params.action is Action.DRAIN:
            scope = self._recover_archive(scope, entries)
        scope = self._resume_scope(scope, entries)
        if scope.size == 0:
            if self.params.filter is not None:  # refused even when there is nothing to do
                frames.check_filter(self.spark, self.params.filter)
            return planned, scope
        if not self.params.dry_run:
            ranges = [(q.key, q.start, q.end) for q in scope.queues]
            started = ledger.Entry(self.params.job, ledger.STARTED, scope.queues[0].key, 0, 0,
                                   data=ledger.scope_data(ranges, 0, ""))  # fmt: skip
            asyncio.run(self._append(scope, started))
        if self.params.action is Action.PURGE and self.params.filter is None:
            self.counts.update(read=scope.size, matched=scope.size)
            if not self.params.dry_run:
                self.counts["purged"] = scope.size
                asyncio.run(self._handled(scope))
            return planned, scope
        frame = frames.dead_letters(self.spark, self.params, scope)
        if self.params.dry_run:
            self.counts["read"], self.counts["matched"] = frames.count_only(frame)
            return planned, scope
        resume = ledger.resume_points(entries, self.params.job, scope.committed())
        if self.params.action is Action.DRAIN:
            handled = self._drain(frame, scope, resume)
        elif self.params.action is Action.REPROCESS:
            handled = self._reprocess(frame, scope, resume)
        else:
            handled = self._purge(frame)
        if handled is None:
            asyncio.run(self._handled(scope))
        else:
            asyncio.run(self._acknowledge(scope, handled))
        return planned, scope

    def _reprocess(
        self, frame: Any, scope: Scope, resume: dict[Any, ledger.Resume]
    ) -> dict[QueueKey, list[Range]] | None:
        """Send the matched dead letters; the others stay where they are. Returns the ranges
        to acknowledge (None: every dead letter of the scope was sent). Without a filter the
        tasks read and send in one pass (:mod:`reconsume.spark.jobs.resend`)."""
        if self.params.filter is None:
            read, sent = self._resend(scope, resume)
            matched = read
        else:
            counted, observation = frames.observed(frame, "dead-letters")
            sent = self._send(frames.sends(counted, self.params), scope, resume)
            read, matched = frames.counts_of(observation)
        resent = sum(sent.sent.values())
        self.counts.update(read=read, matched=matched, resent=resent)
        self.counts["kept"] = read - resent - sent.skipped
        if self.counts["kept"] == 0:
            return None
        return frames.handled_ranges(frame, frames.resent(self.params))

    def _purge(self, frame: Any) -> dict[QueueKey, list[Range]]:
        """A filtered purge: the matched dead letters are acknowledged, nothing is sent."""
        counted, observation = frames.observed(frame, "dead-letters")
        handled = frames.handled_ranges(counted, F.col(frames.MATCHED))
        read, matched = frames.counts_of(observation)
        self.counts.update(read=read, matched=matched, purged=matched, kept=read - matched)
        return handled

    def _resend(self, scope: Scope, resume: dict[Any, ledger.Resume]) -> tuple[int, Any]:
        parallelism = self.spark.sparkContext.defaultParallelism
        read, sent = resend.resend(
            self.spark,
            frames.read_options(self.params, scope),
            frames.send_options(self.params, scope, resume, parallelism),
            target_topic=self.params.target_topic,
            job=self.params.job,
            reset=frames.RESET,
            marker=frames.REPROCESSED,
        )
        self.counts["skipped"] += sent.skipped
        return read, sent

    def _send(self, frame: Any, scope: Scope, resume: dict[Any, ledger.Resume]) -> Any:
        self.work.mkdir(parents=True, exist_ok=True)
        report = str(self.work / f"sent-{uuid.uuid4().hex}.json")
        parallelism = self.spark.sparkContext.defaultParallelism
        sent = frames.write_sends(frame, self.params, scope, resume, report, parallelism)
        self.counts["skipped"] += sent.skipped
        return sent

    # ------------------------------------------------------------------ drain
    def _drain(
        self, frame: Any, scope: Scope, resume: dict[Any, ledger.Resume]
    ) -> dict[QueueKey, list[Range]] | None:
        """Archive the matched dead letters; the others stay where they are. Returns the
        ranges to acknowledge (None: no filter, the whole scope is handled)."""
        path = self.params.sink_path
        assert path is not None
        self._check_sink(path)
        run = uuid.uuid4().hex
        filtered = self.params.filter is not None
        ranges = [(q.key, q.start, q.end) for q in scope.queues]
        first = scope.queues[0].key
        data = ledger.scope_data(ranges, 0, path) | {"run": run, "filtered": filtered}
        asyncio.run(self._append(scope, ledger.Entry(self.params.job, ledger.ARCHIVING, first,
                                                     0, 0, data=data)))  # fmt: skip
        counted, observation = frames.observed(frame, "dead-letters")
        frames.write_archive(counted, run, self.params)
        read, matched = frames.counts_of(observation)
        self.counts.update(read=read, matched=matched, archived=matched, kept=read - matched)
        done = ledger.scope_data(ranges, matched, path) | {"run": run, "filtered": filtered}
        asyncio.run(self._append(scope, ledger.Entry(self.params.job, ledger.ARCHIVED, first,
                                                     0, 0, data=done)))  # fmt: skip
        if not filtered:
            return None
        return self._archived_ranges(path, run) if matched else {}

    def _resume_scope(self, scope: Scope, entries: list[ledger.Entry]) -> Scope:
        """A failed attempt's scope, when one is unfinished: the re-run ends where it did."""
        started = ledger.last_started(entries, self.params.job)
        if started is None:
            return scope
        ends = {k: end for k, (_, end) in ledger.archived_ranges(started).items()}
        if all(ends.get(q.key, 0) <= q.start for q in scope.queues):
            return scope  # a finished run's
        return scope.limited(ends)

    def _recover_archive(self, scope: Scope, entries: list[ledger.Entry]) -> Scope:
        """Finish what a crashed attempt archived: its offsets move, nothing is written."""
        last = ledger.last_archive_entry(entries, self.params.job)
        if last is None:
            return scope
        ends = {k: end for k, (_, end) in ledger.archived_ranges(last).items()}
        if all(ends.get(q.key, 0) <= q.start for q in scope.queues):
            return scope  # a finished run's
        count = int(last.data.get("count", 0))
        path, run = str(last.data["path"]), str(last.data["run"])
        if last.kind == ledger.ARCHIVING:
            count = self._archived_rows(path, run)
            if count == 0:
                return scope  # the write never committed: this run writes it
        done = scope.limited(ends)
        if last.data.get("filtered"):  # what it archived is acknowledged, the rest stays
            archived = self._archived_ranges(path, run) if count else {}
            asyncio.run(self._acknowledge(done, archived))
        else:
            asyncio.run(self._handled(done))
        self.counts["skipped"] += count
        return scope.advanced(ends)

    def _archived_ranges(self, path: str, run: str) -> dict[QueueKey, list[Range]]:
        """The queue offsets of the dead letters run ``run`` archived, as ranges."""
        archive = self.spark.read.format(self.params.sink_format).load(path)
        return frames.handled_ranges(archive, F.col(frames.ARCHIVE_RUN) == run)

    def _archived_rows(self, path: str, run: str) -> int:
        try:
            archive = self.spark.read.format(self.params.sink_format).load(path)
        except Exception:  # noqa: BLE001 - nothing written there yet
            return 0
        if frames.ARCHIVE_RUN not in archive.columns:
            return 0
        return int(archive.where(F.col(frames.ARCHIVE_RUN) == run).count())

    def _check_sink(self, path: str) -> None:
        """Create the archive's directory and a probe file in it, through Hadoop's file
        systems (file:, s3a:, hdfs: ...), before anything is done."""
        jvm: Any = self.spark.sparkContext._jvm
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        try:
            directory = jvm.org.apache.hadoop.fs.Path(path)
            fs = directory.getFileSystem(conf)
            created = fs.mkdirs(directory)
            probe = jvm.org.apache.hadoop.fs.Path(directory, f"_probe-{uuid.uuid4().hex}")
            if created:
                fs.create(probe, True).close()
                fs.delete(probe, False)
        except Exception as exc:
            raise SinkNotWritableError(f"cannot write to {path}: {_first_line(exc)}") from exc
        if not created:
            raise SinkNotWritableError(f"cannot create the archive directory {path}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run(params: JobParams, spark: SparkSession | None = None) -> Result:
    """Run the job and return its result (phase Failed with a reason on an error)."""
    result = Result(params.action, params.group, params.job, params.dry_run, now())
    job = Run(params, spark)
    try:
        planned, handled = job.execute()
    except frames.InvalidFilterError as exc:
        return result.failed("InvalidFilter", str(exc))
    except UnknownGroupError as exc:
        return result.failed("UnknownGroup", str(exc))
    except SinkNotWritableError as exc:
        return result.failed("SinkNotWritable", str(exc))
    except ConcurrentRunError as exc:
        return result.failed("ConcurrentRun", str(exc))
    except (RemotingConnectError, RemotingTimeoutError) as exc:
        return result.failed("BrokerUnavailable", str(exc))
    except (InvalidArgumentError, ReconsumeError) as exc:
        return result.failed("JobFailed", str(exc))
    except Exception as exc:  # noqa: BLE001 - a Spark failure: reported, not raised
        return result.failed("JobFailed", f"{type(exc).__name__}: {_first_line(exc)}")
    finally:
        _remove(job.work)
    offsets: dict[str, Any] = {}
    if planned.queues:
        offsets = {"start": planned.starting().to_dict(), "end": handled.ending().to_dict()}
    return Result(params.action, params.group, params.job, params.dry_run, result.start_time,
                  counts=job.counts, offsets=offsets, completion_time=now())  # fmt: skip


def _remove(directory: Path) -> None:
    if directory.exists():
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run ``reconsume dlq`` with ``argv``; exit status 0 when the job succeeded, 1 if not."""
    try:
        params = parse(list(sys.argv[1:] if argv is None else argv))
    except InvalidArgumentError as exc:
        print(f"reconsume dlq: {exc}", file=sys.stderr)
        return 2
    result = run(params, spark)
    publish(result, params.termination_log)
    return 0 if result.phase == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
