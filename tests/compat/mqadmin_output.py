"""Running Apache RocketMQ's mqadmin (see ``conftest.Mqadmin``) and reading what it prints.

mqadmin exits 0 whether or not its command worked; a failed command prints a Java stack trace
to stderr. Its log lines (by ``mqadmin/conf/logback_tools.xml``) start with a time and take
one line each, so any other stderr line is a failure.

A run that got nothing done because a request timed out (mqadmin's timeouts are 3 to 5 s) is
run once more: on a machine loaded enough to stall a JVM or a server that long, that is the
machine, not reconsume. Any other failure fails the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconsume.message.model import StoredMessage

from .conftest import Mqadmin

TIMEOUT_S = 40.0
"""One mqadmin run takes 3-4 s (most of it the JVM and Netty shutting down)."""
_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (WARN|ERROR) ")
_INT_KEY = re.compile(r"([{,]\s*)(-?\d+):")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z ]*):\s+(.*)$")


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def failure(self) -> list[str]:
        """The stderr lines that are not log lines: the trace of a failed command."""
        return [line for line in self.stderr.splitlines() if not _LOG_LINE.match(line)]

    def output(self) -> str:
        """stdout, once the run is known to have worked."""
        failed = self.failure()
        explain = (
            f"mqadmin {' '.join(self.args)} failed (exit {self.returncode}):\n"
            f"{self.stderr[-4000:]}\nstdout:\n{self.stdout[-2000:]}"
        )
        assert self.returncode == 0, explain
        assert not failed, explain
        return self.stdout


async def run(tool: Mqadmin, *args: str) -> Run:
    process = await asyncio.create_subprocess_exec(
        *tool.command(*args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TZ": "UTC"},  # the times it prints are UTC
    )
    try:
        async with asyncio.timeout(TIMEOUT_S):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.communicate()
        raise AssertionError(f"mqadmin {' '.join(args)} ran past {TIMEOUT_S}s") from None
    assert process.returncode is not None
    return Run(args, process.returncode, stdout.decode(), stderr.decode())


PARALLEL = 2
"""mqadmin runs at once: each is a JVM whose start-up takes a core for a second or two; more at
a time on a 2-core machine only stretch every run (and its request timeouts)."""


async def outputs(tool: Mqadmin, *commands: Sequence[str]) -> list[str]:
    """Run the commands, ``PARALLEL`` at a time (each a JVM of its own); their stdout, in
    order."""
    slots = asyncio.Semaphore(PARALLEL)

    async def one(command: Sequence[str]) -> Run:
        async with slots:
            return await run(tool, *command)

    runs = await asyncio.gather(*(one(c) for c in commands))
    return [r.output() for r in runs]


# ---------------------------------------------------------------------- reading
def fastjson(text: str) -> Any:
    """fastjson's pretty output (``TopicRouteData.toJson(true)``): integer map keys are not
    quoted."""
    return json.loads(_INT_KEY.sub(r'\1"\2":', text))


def table(text: str, *, columns: int) -> list[list[str]]:
    """The rows under the ``#``-header line, split into ``columns`` on whitespace (the last
    column keeps its spaces), up to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#"))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        row = [cell.strip() for cell in line.split(None, columns - 1)]
        rows.append(row + [""] * (columns - len(row)))
    return rows


def key_values(lines: Sequence[str], separator: str) -> dict[str, str]:
    """``key <separator> value`` lines (keys padded with spaces)."""
    found = {}
    for line in lines:
        key, sep, value = line.partition(separator)
        if sep:
            found[key.strip()] = value.strip()
    return found


def sections(text: str) -> dict[str, list[str]]:
    """``getBrokerConfig -c``: the lines under each ``============Master: ADDR============``."""
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if match := re.fullmatch(r"=+Master: (\S+?)=+", line.strip()):
            current = found.setdefault(match.group(1), [])
        else:
            current.append(line)
    return found


def message_fields(text: str) -> dict[str, str]:
    """``queryMsgById``: ``Name:   value`` lines."""
    fields = {}
    for line in text.splitlines():
        if match := _FIELD.match(line):
            fields[match.group(1)] = match.group(2).strip()
    return fields


def java_map(text: str) -> dict[str, str]:
    """A Java ``HashMap.toString()`` of strings: ``{a=1, b=2}``."""
    inner = text.strip().removeprefix("{").removesuffix("}")
    return dict(item.split("=", 1) for item in inner.split(", ") if item)


def utc(ms: int, *, millis: bool = False) -> str:
    """How mqadmin prints a time under TZ=UTC: ``yyyy-MM-dd HH:mm:ss`` (``,SSS`` with
    ``millis``)."""
    text = datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text},{ms % 1000:03d}" if millis else text


def check_message(shown: str, stored: StoredMessage, offset_msg_id: str, group: str) -> None:
    """``queryMsgById`` shows the stored message (read with VIEW_MESSAGE_BY_ID ourselves)."""
    fields = message_fields(shown)
    assert fields["OffsetID"] == offset_msg_id
    assert fields["Topic"] == stored.topic
    assert fields["Tags"] == f"[{stored.properties.get('TAGS')}]"
    assert fields["Keys"] == f"[{stored.properties.get('KEYS')}]"
    assert int(fields["Queue ID"]) == stored.queue_id
    assert int(fields["Queue Offset"]) == stored.queue_offset
    assert int(fields["CommitLog Offset"]) == stored.commit_log_offset
    assert int(fields["Reconsume Times"]) == 0
    assert fields["Born Timestamp"] == utc(stored.born_timestamp_ms, millis=True)
    assert fields["Store Timestamp"] == utc(stored.store_timestamp_ms, millis=True)
    assert fields["Store Host"] == str(stored.store_host)
    assert fields["Born Host"] == str(stored.born_host)
    assert java_map(fields["Properties"]) == stored.properties
    body = Path(fields["Message Body Path"])
    try:
        assert body.read_bytes() == stored.body
    finally:
        body.unlink(missing_ok=True)
    # The group has offsets in the topic but no consumer online.
    assert f"consumerGroup={group}, trackType=NOT_ONLINE" in shown
