"""Crash recovery with real processes: a writer appends under Sync flush and acknowledges each
put; the test SIGKILLs it at random points (at start-up, during recovery, mid-append, right
after a segment roll), reopens the directory and checks that every acknowledged put survived
byte for byte, that no partial record is visible and that the consume queues match the log.
"""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconsume.message.properties import decode_properties
from reconsume.store import FlushMode, GetStatus, MessageStore, RecoveryReport

from . import _crash_writer as writer
from ._helpers import check_consistency, decode

WRITER = Path(writer.__file__)
DEADLINE_S = 20.0
ITERATIONS = 14
THREADS = 4


@dataclass(frozen=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    seed: str


class Writer:
    """One run of the writer process and what it printed."""

    def __init__(self, root: Path, run: str, log: Path, limit: int = 0) -> None:
        self.log = log
        with log.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(WRITER), str(root), run, str(THREADS), str(limit)],
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buffer = b""
        self._eof = False
        self.lines: list[str] = []
        self.ready_offset: int | None = None
        self.acks: list[Ack] = []

    def _read(self, timeout_s: float) -> None:
        readable, _, _ = select.select([self._fd], [], [], max(timeout_s, 0.0))
        if not readable:
            return
        chunk = os.read(self._fd, 1 << 16)
        if not chunk:
            self._eof = True
            return
        *complete, self._buffer = (self._buffer + chunk).split(b"\n")
        for raw in complete:
            line = raw.decode()
            self.lines.append(line)
            kind, *fields = line.split(" ")
            if kind == "READY":
                self.ready_offset = int(fields[0])
            elif kind == "ACK":
                topic, queue_id, queue_offset, phys, size, seed = fields
                ack = Ack(topic, int(queue_id), int(queue_offset), int(phys), int(size), seed)
                self.acks.append(ack)

    def wait_for(self, what: str, predicate: Callable[[], bool]) -> None:
        """Poll the output until ``predicate()`` holds; fail after the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        while not predicate():
            remaining = deadline - time.monotonic()
            if self._eof or remaining <= 0:
                self.finish()
                pytest.fail(f"writer never got to {what}; stderr:\n{self.log.read_text()}")
            self._read(min(remaining, 0.5))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.finish()
        code = self.proc.returncode
        assert code == -signal.SIGKILL, f"writer exited {code}: {self.log.read_text()}"

    def finish(self) -> None:
        """Collect everything printed until the process is gone."""
        deadline = time.monotonic() + DEADLINE_S
        while not self._eof and time.monotonic() < deadline:
            self._read(deadline - time.monotonic())
        self.proc.wait(timeout=DEADLINE_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def verify(root: Path, acks: list[Ack]) -> tuple[int, RecoveryReport]:
    """Open ``root`` as a restart would and check every acknowledged put; returns the end
    of the log and what recovery did."""
    with MessageStore(root, writer.settings(FlushMode.ASYNC), background=False) as store:
        report = store.recovery
        assert report.anomalies == [], report.anomalies
        for ack in acks:
            body, properties = writer.message(ack.seed)
            got = store.get_messages(ack.topic, ack.queue_id, ack.queue_offset, max_count=1)
            assert got.status is GetStatus.FOUND, (ack, got.status, report.summary())
            assert got.queue_offsets == [ack.queue_offset]
            (record,) = got.records
            assert store.read_message(ack.commit_log_offset) == record, ack
            message = decode(record)
            assert (message.topic, message.queue_id, message.queue_offset) == (
                ack.topic,
                ack.queue_id,
                ack.queue_offset,
            )
            assert message.commit_log_offset == ack.commit_log_offset
            assert message.store_size == ack.size
            assert message.body == body, ack
            assert message.properties == decode_properties(properties), ack
        records = check_consistency(store)
        assert records >= len(acks)
        assert len({(a.topic, a.queue_id, a.queue_offset) for a in acks}) == len(acks)
        return store.commitlog.write_offset, report


def kill_somewhere(proc: Writer, rng: random.Random) -> str:
    """Kill ``proc`` at a point chosen by ``rng``; returns a name for it."""
    how = rng.choice(["start", "ready", "running", "running", "roll", "acks"])
    if how == "start":  # during interpreter start-up, imports or recovery
        time.sleep(rng.uniform(0.0, 0.3))
    elif how == "ready":
        proc.wait_for("READY", lambda: proc.ready_offset is not None)
    elif how == "running":
        proc.wait_for("READY", lambda: proc.ready_offset is not None)
        time.sleep(rng.uniform(0.005, 0.3))
    elif how == "roll":  # right after a record opened a new segment
        seen = len(proc.acks)

        def rolled() -> bool:
            fresh = proc.acks[seen:]
            return any(a.commit_log_offset % writer.SEGMENT_BYTES == 0 for a in fresh)

        proc.wait_for("a segment roll", rolled)
    else:
        count = rng.randrange(1, 60)
        proc.wait_for(f"{count} acks", lambda: len(proc.acks) >= count)
    proc.kill()
    return how


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_acknowledged_puts_survive_sigkill(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "store"
    root.mkdir()  # a writer killed at start-up may not have created it
    acks: list[Ack] = []
    verified_end: int | None = None
    history: list[tuple[str, int, int, int]] = []
    for iteration in range(ITERATIONS):
        run = f"s{seed}i{iteration}"
        proc = Writer(root, run, tmp_path / f"{run}.stderr")
        try:
            how = kill_somewhere(proc, rng)
        finally:
            if proc.proc.poll() is None:
                proc.proc.kill()
                proc.finish()
        if proc.ready_offset is not None and verified_end is not None:
            # the writer's own recovery found the same end as the last verification did
            assert proc.ready_offset == verified_end, history
        acks += proc.acks
        # verify a copy, so that the next writer recovers from the kill itself
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy)
        verified_end, report = verify(copy, acks)
        history.append((how, len(proc.acks), report.records_scanned, report.truncated_bytes))
    assert sum(1 for _how, count, _scanned, _cut in history if count) >= ITERATIONS // 3, history
    assert any(scanned for _how, _count, scanned, _cut in history), history
    # a run that is not killed continues the same log and closes cleanly
    final = Writer(root, f"s{seed}final", tmp_path / "final.stderr", limit=10)
    final.wait_for("DONE", lambda: "DONE" in final.lines)
    final.finish()
    assert final.proc.returncode == 0, final.log.read_text()
    assert final.ready_offset == verified_end
    assert len(final.acks) == 10 * THREADS
    acks += final.acks
    _end, report = verify(root, acks)
    assert report.clean_shutdown
    assert (report.records_scanned, report.truncated_at) == (0, None)
