"""The dead-letter jobs' ledger: what an attempt of a job has sent or archived, kept on the
brokers so that a re-run after a failure neither loses nor repeats anything.

The ledger is the topic ``RECONSUME_DLQ_LEDGER`` with one queue on each broker; an entry about
a queue of ``%DLQ%<group>`` goes to the ledger queue of the broker holding that queue. Entries
are JSON message bodies:

``started``
    written when a run starts: its scope. A re-run after a failure finishes that scope (it
    does not reach further, e.g. to dead letters stored since).
``sending``
    written before a batch of re-sends: the dead-letter offsets the batch covers and, per
    target queue, an offset no later than where the batch's messages can land. A re-run that
    finds this entry last scans those target queues for the batch's message ids (derived from
    the dead letters' positions, so the same on every attempt) and re-sends only the missing.
``sent``
    written when a task has handled its queue: everything before ``end`` was sent.
``archiving`` / ``archived``
    written before a Drain writes its archive (the scope and the run's id, which every
    archived row carries) and once the archive is committed (with the row count). A re-run
    that finds ``archived`` last, or ``archiving`` and rows of that run in the archive, only
    moves the offsets the crashed attempt did not.

What a job has finished is marked by the committed offsets of the group
``%DLQ%<group>`` (see ``dead_letter_job_group``): on the dead-letter queues (what is handled,
with the offsets a filtered run acknowledged past it) and on the ledger queues (entries before
it belong to finished runs and are not read again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconsume.client.broker_api import BrokerApi
from reconsume.client.producer import Producer
from reconsume.client.pull import pull_once
from reconsume.client.routes import MessageQueue
from reconsume.errors import InvalidArgumentError
from reconsume.message.model import Message
from reconsume.spark.offsets import QueueKey

LEDGER_TOPIC = "RECONSUME_DLQ_LEDGER"
STARTED = "started"
SENDING = "sending"
SENT = "sent"
ARCHIVING = "archiving"
ARCHIVED = "archived"
_KINDS = frozenset({STARTED, SENDING, SENT, ARCHIVING, ARCHIVED})


@dataclass(frozen=True, slots=True, order=True)
class TargetMark:
    """A queue messages were sent to, and an offset no later than where they landed."""

    topic: str
    broker: str
    queue_id: int
    offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "broker": self.broker, "queueId": self.queue_id,
                "offset": self.offset}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TargetMark:
        return cls(str(data["topic"]), str(data["broker"]), int(data["queueId"]),
                   int(data["offset"]))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger entry of ``job`` about dead-letter queue ``queue``: offsets start..end."""

    job: str
    kind: str
    queue: QueueKey
    start: int
    end: int
    targets: tuple[TargetMark, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    """Free-form facts of an ``archived`` entry (scope, row count, path)."""
    stored_ms: int | None = field(default=None, compare=False)
    """When the broker stored it (entries read back); not part of the body."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidArgumentError(f"ledger entry kind {self.kind!r}")

    def to_json(self) -> bytes:
        body = {
            "job": self.job,
            "kind": self.kind,
            "queue": str(self.queue),
            "start": self.start,
            "end": self.end,
            "targets": [t.to_dict() for t in self.targets],
            "data": dict(self.data),
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, body: bytes, stored_ms: int | None = None) -> Entry:
        data = json.loads(body)
        return cls(
            str(data["job"]),
            str(data["kind"]),
            QueueKey.parse(str(data["queue"])),
            int(data["start"]),
            int(data["end"]),
            tuple(TargetMark.from_dict(t) for t in data.get("targets", ())),
            dict(data.get("data", {})),
            stored_ms,
        )


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a re-run picks a dead-letter queue up: every dead letter before ``done`` was
    handled; ``pending`` is the batch that may have been partly sent (offsets
    ``pending.start``..``pending.end``), to be checked against its targets."""

    done: int
    pending: Entry | None = None

    def to_dict(self) -> dict[str, Any]:
        pending = None if self.pending is None else json.loads(self.pending.to_json())
        return {"done": self.done, "pending": pending}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resume:
        pending = data.get("pending")
        entry = None if pending is None else Entry.from_json(json.dumps(pending).encode())
        return cls(int(data["done"]), entry)


def resume_points(
    entries: Iterable[Entry], job: str, committed: Mapping[QueueKey, int]
) -> dict[QueueKey, Resume]:
    """Per dead-letter queue, what earlier attempts of ``job`` already sent (entries in the
    order written; ``committed``: the queues' handled offsets). Queues without entries past
    their committed offset are left out."""
    done: dict[QueueKey, int] = {}
    pending: dict[QueueKey, Entry] = {}
    for entry in entries:
        if entry.job != job or entry.kind not in (SENDING, SENT):
            continue
        key = entry.queue
        if entry.end <= committed.get(key, -1):
            continue  # a finished run's
        # A task writes `sending` for a batch only after the batch before it was sent.
        reached = entry.start if entry.kind == SENDING else entry.end
        done[key] = max(done.get(key, reached), reached)
        if entry.kind == SENDING:
            pending[key] = entry
        elif key in pending and pending[key].end <= entry.end:
            del pending[key]
    points: dict[QueueKey, Resume] = {}
    for key, through in done.items():
        last = pending.get(key)
        points[key] = Resume(through, last if last is not None and last.end > through else None)
    return points


def last_started(entries: Iterable[Entry], job: str) -> Entry | None:
    """The last ``started`` entry of ``job``."""
    found = None
    for entry in entries:
        if entry.job == job and entry.kind == STARTED:
            found = entry
    return found


def last_archive_entry(entries: Iterable[Entry], job: str) -> Entry | None:
    """The last ``archiving`` or ``archived`` entry of ``job``."""
    found = None
    for entry in entries:
        if entry.job == job and entry.kind in (ARCHIVING, ARCHIVED):
            found = entry
    return found


def last_written_ms(entries: Iterable[Entry], job: str) -> int | None:
    """When the broker stored the newest entry of ``job`` (None: it has none)."""
    times = [e.stored_ms for e in entries if e.job == job and e.stored_ms is not None]
    return max(times, default=None)


def message_key(job: str, queue: QueueKey, offset: int) -> str:
    """The UNIQ_KEY a job gives the message it sends for the dead letter at ``offset`` of
    ``queue``: new (never the dead letter's own), and the same on every attempt. 32 upper-case
    hex digits, the shape of RocketMQ's message ids."""
    digest = hashlib.blake2b(f"{job}\x00{queue}\x00{offset}".encode(), digest_size=16)
    return digest.hexdigest().upper()


def message_keys(job: str, queue: QueueKey, offsets: Iterable[int]) -> list[str]:
    """:func:`message_key` of each of ``offsets`` of ``queue``."""
    prefix = hashlib.blake2b(f"{job}\x00{queue}\x00".encode(), digest_size=16)
    keys: list[str] = []
    for offset in offsets:
        digest = prefix.copy()
        digest.update(str(offset).encode())
        keys.append(digest.hexdigest().upper())
    return keys


async def append(producer: Producer, address: str, broker: str, entry: Entry) -> None:
    """Write ``entry`` to the ledger queue of ``broker`` (at ``address``)."""
    message = Message(LEDGER_TOPIC, entry.to_json())
    message.tags = entry.kind
    message.keys = [entry.job]
    await producer.send_direct(address, message, MessageQueue(LEDGER_TOPIC, broker, 0))


async def read_entries(
    api: BrokerApi, address: str, broker: str, *, start: int, group: str, batch: int = 64
) -> list[Entry]:
    """The entries of ``broker``'s ledger queue from offset ``start`` (clamped to what is
    kept), in the order written."""
    queue = MessageQueue(LEDGER_TOPIC, broker, 0)
    offset = max(start, await api.min_offset(address, queue))
    end = await api.max_offset(address, queue)
    entries: list[Entry] = []
    while offset < end:
        result = await pull_once(api, address, queue, offset, group=group, max_nums=batch)
        entries.extend(
            Entry.from_json(m.body, m.store_timestamp_ms)
            for m in result.messages
            if m.queue_offset < end
        )
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return entries


def scope_data(
    ranges: Sequence[tuple[QueueKey, int, int]], count: int, path: str
) -> dict[str, Any]:
    """The ``data`` of an ``archived`` entry."""
    return {
        "ranges": {str(k): [start, end] for k, start, end in ranges},
        "count": count,
        "path": path,
    }


def archived_ranges(entry: Entry) -> dict[QueueKey, tuple[int, int]]:
    """The queue ranges an ``archived`` entry covers."""
    ranges = entry.data.get("ranges", {})
    return {QueueKey.parse(k): (int(v[0]), int(v[1])) for k, v in ranges.items()}
