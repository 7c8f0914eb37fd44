"""The master's side of replication: three requests a replica sends on the remoting port.

* ``REPLICA_HANDSHAKE`` (body: the replica's id, epoch history, log end, segment size): the
  answer says where the two logs agree (:func:`~reconsume.store.epochs.agreed_end`), where
  the master's log starts and ends, and the master's history and epoch. A replica that has
  seen a newer epoch than the master's is refused: this master was deposed.
* ``REPLICATE_LOG`` (header: ``replicaId``, ``offset``, ``ackOffset``, ``maxBytes``): the log
  from ``offset`` as it is (:meth:`MessageStore.read_log`), or, at the end of the log, the
  request is held until a write arrives or ``hold_s`` passes (long polling, as pulls are held).
  ``ackOffset`` is what the replica has stored; it feeds the in-sync set and releases Sync
  writes (:class:`~reconsume.broker.replicas.ReplicaSet`). The answer carries the master's log
  end, epoch, metadata version and ``readLimit``: how far the master's other replicas that
  may take over hold the log (absent: none may), where the replica's consumers' reads stop.
  A request is not held when that changed since the last answer, and held ones are answered
  when the master's read limit moves: a replica learns of it at once.
* ``REPLICA_METADATA``: topic and group configs, consumer and schedule offsets, the offsets
  acknowledged past a committed one (:mod:`reconsume.store.acked`) and the timer's progress,
  in one JSON document; a replica asks when the version it was told changes.

Running on the broker's own port and framing means replication needs no second port, Service
entry or NetworkPolicy rule, and whatever guards the remoting port guards it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconsume.broker.context import BrokerContext
from reconsume.broker.replicas import ReplicaSet
from reconsume.engine.timer_progress import progress_path
from reconsume.errors import InvalidArgumentError, ReplicationError
from reconsume.store import MessageStore
from reconsume.store.epochs import Epoch, agreed_end, check_history
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

MAX_CHUNK_BYTES = 4 << 20
"""The most log one answer carries, whatever the replica asks for."""
_REPLICA_ID = "reconsume.replicaId"
_TOLD_LIMIT = "reconsume.toldReadLimit"
_UNTOLD = -1


@dataclass(eq=False, slots=True)
class _Held:
    """A replica's request held at the end of the log, answered from :meth:`log_grew` or when
    its timer fires (no task waits for it)."""

    request: RemotingCommand
    connection: Connection
    replica_id: str
    offset: int
    max_bytes: int
    timer: asyncio.TimerHandle = field(init=False)


def metadata_version(store: MessageStore) -> str:
    """Changes when anything :func:`metadata_snapshot` holds changes (compared for equality)."""
    return (
        f"{store.topics.version}.{store.groups.version}."
        f"{store.consumer_offsets.changes}.{store.schedule_offsets.changes}.{store.acked.version}"
    )


def configs_version(version: str | None) -> str | None:
    """The part of a :func:`metadata_version` that topic and group configs change (a replica
    fetches those at once; offsets, which change all the time, at an interval)."""
    return None if version is None else version.rsplit(".", 3)[0]


def metadata_snapshot(store: MessageStore) -> dict[str, Any]:
    timer = progress_path(store.root / "config")
    try:
        timer_progress = json.loads(timer.read_bytes())
    except FileNotFoundError:
        timer_progress = None
    return {
        "version": metadata_version(store),
        "topics": {name: config.to_dict() for name, config in store.topics.items()},
        "groups": {name: config.to_dict() for name, config in store.groups.items()},
        "consumerOffsets": _offsets(store.consumer_offsets.snapshot()),
        "scheduleOffsets": _offsets(store.schedule_offsets.snapshot()),
        "timerProgress": timer_progress,
        "ackedOffsets": store.acked.to_document(),
    }


def _offsets(table: dict[str, dict[int, int]]) -> dict[str, dict[str, int]]:
    return {key: {str(q): o for q, o in queues.items()} for key, queues in table.items()}


def _field(request: RemotingCommand, name: str) -> int:
    raw = request.ext_fields.get(name)
    try:
        return int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"header field {name} is {raw!r}, not an integer") from None


def parse_history(raw: object) -> list[Epoch]:
    """An epoch history as sent ([[epoch, start], ...]), checked."""
    try:
        entries = [Epoch(int(e), int(s)) for e, s in raw]  # type: ignore[attr-defined]
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"not an epoch history: {raw!r}") from exc
    try:
        check_history(entries)
    except ReplicationError as exc:
        raise InvalidArgumentError(str(exc)) from exc
    return entries


class ReplicationProcessor:
    """Answers a master's replicas."""

    def __init__(
        self,
        context: BrokerContext,
        replicas: ReplicaSet,
        *,
        epoch: Callable[[], int],
        hold_s: float = 1.0,
    ) -> None:
        self.context = context
        self.replicas = replicas
        self._epoch = epoch
        self.hold_s = hold_s
        self._held: set[_Held] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.uncork: Callable[[], None] = lambda: None
        """Writes now what the read being dispatched has written so far
        (:meth:`Dispatcher.uncork` of the server's)."""

    def log_grew(self) -> None:
        """Something was appended, or the read limit moved: answer the held requests now,
        before whatever appended goes on (a Sync write waits for the answer's round trip)."""
        if self._held:
            held, self._held = self._held, set()
            for request in held:
                request.timer.cancel()
                request.connection.reply(request.request, self._answer_held(request))

    def _expire(self, held: _Held) -> None:
        """``hold_s`` passed with nothing appended: answer with what there is."""
        self._held.discard(held)
        held.connection.reply(held.request, self._answer_held(held))

    def _answer_held(self, held: _Held) -> RemotingCommand:
        try:
            data = self.context.store.read_log(held.offset, held.max_bytes)
        except ReplicationError as exc:
            return held.request.respond(ResponseCode.SYSTEM_ERROR, f"handshake again: {exc}")
        return self._answer(held.request, held.connection, held.replica_id, held.offset, data)

    def connection_closed(self, connection: Connection) -> None:
        replica_id = connection.attributes.get(_REPLICA_ID)
        if replica_id is not None:
            self.replicas.forget(replica_id, time.monotonic())

    # ------------------------------------------------------------------ requests
    def handshake(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        try:
            hello = json.loads(request.body)
            replica_id = str(hello["replicaId"])
            history = parse_history(hello["epochs"])
            end = int(hello["end"])
            segment_bytes = int(hello["segmentBytes"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"not a replica handshake: {exc}") from exc
        store = self.context.store
        epoch = self._epoch()
        seen = history[-1].epoch if history else 0
        if seen > epoch:
            log.warning(
                "replica %s (%s) has seen epoch %d; this master's is %d: it was deposed",
                replica_id,
                connection.peer,
                seen,
                epoch,
            )
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"this master's epoch {epoch} is older than epoch {seen} the replica has seen",
            )
        if segment_bytes != store.commitlog.segment_bytes:
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"commit-log segments differ: the master's are {store.commitlog.segment_bytes} "
                f"bytes, the replica's {segment_bytes}",
            )
        mine = store.epochs.entries
        log_end = store.commitlog.write_offset
        # None (no epoch in common, e.g. a new replica): the replica starts over at minOffset
        agreed = agreed_end(history, end, mine, log_end)
        connection.attributes[_REPLICA_ID] = replica_id
        answer = {
            "epoch": epoch,
            "epochs": [[e.epoch, e.start_offset] for e in mine],
            "minOffset": store.commitlog.min_offset,
            "maxOffset": log_end,
            "agreed": agreed,
        }
        log.info(
            "replica %s (%s) at %d agrees with this log up to %s",
            replica_id,
            connection.peer,
            end,
            agreed,
        )
        return request.respond(body=json.dumps(answer).encode())

    def replicate(self, request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        """The answer at once when there is log to send (or the read limit to tell), else None:
        the request is held, answered once the log grows or ``hold_s`` passes. The
        acknowledgement is taken as the request arrives: a Sync write waiting for it is
        released without a turn of the event loop in between."""
        replica_id = request.ext_fields.get("replicaId") or connection.peer
        offset = _field(request, "offset")
        acked = _field(request, "ackOffset")
        max_bytes = min(max(_field(request, "maxBytes"), 1), MAX_CHUNK_BYTES)
        store = self.context.store
        end = store.commitlog.write_offset
        if acked > offset or offset > end:
            # a replica cannot hold more than it asks after, nor more than this log: believing
            # it would let it into the in-sync set and hold Sync writes for it
            return request.respond(
                ResponseCode.SYSTEM_ERROR,
                f"handshake again: offset {offset} and ackOffset {acked} are not within this "
                f"log [{store.commitlog.min_offset}, {end}]",
            )
        connection.attributes[_REPLICA_ID] = replica_id
        self.replicas.seen(replica_id, connection.peer, offset, acked, time.monotonic())
        self.uncork()  # the writes this acknowledgement released leave before the rest
        if offset == end and connection.attributes.get(
            _TOLD_LIMIT, _UNTOLD
        ) == self.replicas.read_limit_for(replica_id):
            # Held until an append (or the read limit moving) answers it from log_grew, in the
            # appending handler itself: no turn of the event loop between a Sync write and
            # its replication.
            held = _Held(request, connection, replica_id, offset, max_bytes)
            loop = self._loop
            if loop is None:
                # kept: asyncio.get_running_loop is a getpid system call on each call (3.11)
                loop = self._loop = asyncio.get_running_loop()
            held.timer = loop.call_later(self.hold_s, self._expire, held)
            self._held.add(held)
            return None
        try:
            data = store.read_log(offset, max_bytes)
        except ReplicationError as exc:
            return request.respond(ResponseCode.SYSTEM_ERROR, f"handshake again: {exc}")
        return self._answer(request, connection, replica_id, offset, data)

    def _answer(
        self,
        request: RemotingCommand,
        connection: Connection,
        replica_id: str,
        offset: int,
        data: bytes,
    ) -> RemotingCommand:
        store = self.context.store
        end = store.commitlog.write_offset
        sent_to = offset + len(data)
        self.replicas.answered(replica_id, sent_to, sent_to >= end, time.monotonic())
        ext = {
            "offset": str(offset),
            "maxOffset": str(end),
            "epoch": str(self._epoch()),
            "metadataVersion": metadata_version(store),
        }
        limit = self.replicas.read_limit_for(replica_id)
        if limit is not None:
            ext["readLimit"] = str(limit)
        connection.attributes[_TOLD_LIMIT] = limit
        return request.respond(ext_fields=ext, body=data)

    def metadata(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        body = json.dumps(metadata_snapshot(self.context.store)).encode()
        return request.respond(body=body)
