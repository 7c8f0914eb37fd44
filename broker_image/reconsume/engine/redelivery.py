"""Finding, after a restart or a failover, which schedule and timer entries were already
delivered, so that they are not delivered again.

The schedule service persists, per level, the offset of the first entry whose delivery is
not yet known durable (``P``) and a commit-log offset ``W`` below which no delivery of an
entry at or past ``P`` can lie (the first unconfirmed delivery, or the log's end when there
is none); the timer does the same with its delivered set. After a crash (or on a replica
taking over, with the master's replicated progress) each service resumes at its persisted
progress, so the entries delivered since the last persist come due again. Every delivered
message carries SCHEDULE_ORIGIN, the commit-log offset of its schedule or timer record;
scanning the log from the smallest ``W`` therefore finds every entry whose earlier delivery
survived, together with that copy. The services skip those entries: the copy already in the
log is what consumers get, and progress moves past the entry once the copy is stored (see
:class:`~reconsume.engine.delivery.DeliveryService`). A copy that did not survive (an OS crash
under Async flush, a write the new master never received) is not found, and the entry is
delivered again: it is not a duplicate either.

A SCHEDULE_ORIGIN value counts only when the record it names is a schedule or timer record
whose real topic, born time, body and reconsume times are the copy's: a client cannot make an
entry skipped by sending a message with the property, and the schedule record of a send-back
(which keeps the property of the delivery it came from) is not taken for that delivery.
"""

from __future__ import annotations

from typing import NamedTuple

from reconsume.errors import CodecError
from reconsume.message import properties as props
from reconsume.message.decode import decode_record, peek_routing
from reconsume.message.model import StoredMessage
from reconsume.message.names import SCHEDULE_TOPIC, TIMER_TOPIC
from reconsume.store import MessageStore, PutResult


class Earlier(NamedTuple):
    """A delivery found in the log, and where the record it delivered is queued."""

    copy: PutResult
    """Where the delivered copy lies (its commit-log offset and size)."""
    topic: str
    """The delivered record's topic: the schedule topic or the timer topic."""
    queue_id: int
    queue_offset: int
    """The delivered record's consume-queue entry."""


def delivered_origins(store: MessageStore, start_offset: int) -> dict[int, Earlier]:
    """The earlier deliveries in the records from commit-log offset ``start_offset`` (a record
    boundary) to the end of the log, by SCHEDULE_ORIGIN (the first copy of each). Run before
    the schedule and timer services append (at start-up, on promotion)."""
    found: dict[int, Earlier] = {}
    commitlog = store.commitlog
    offset = max(start_offset, commitlog.min_offset)
    while offset < commitlog.write_offset:
        record = store.read_message(offset)
        if record is None:
            # A blank record closes the rest of its segment; the next record starts the next.
            segment = commitlog.segment_at(offset)
            if segment is None or segment.end <= offset:
                break
            offset = segment.end
            continue
        value = props.find_property(peek_routing(record, 0)[4], props.SCHEDULE_ORIGIN)
        if value is not None and value.isdigit() and int(value) not in found:
            earlier = _verified(store, int(value), offset, record)
            if earlier is not None:
                found[int(value)] = earlier
        offset += len(record)
    return found


def _verified(store: MessageStore, origin: int, offset: int, record: bytes) -> Earlier | None:
    """The delivery of the record at ``origin`` that the record at ``offset`` is, or None
    when it is not one (the origin is no schedule or timer record, or another message's)."""
    if origin >= offset:
        return None
    raw = store.read_message(origin)
    if raw is None:
        return None  # removed by retention (or no record starts there)
    try:
        scheduled = decode_record(raw)
        copy = decode_record(record)
    except CodecError:
        return None
    if not _delivers(copy, scheduled, origin):
        return None
    return Earlier(
        PutResult(offset, len(record), copy.queue_offset, copy.store_timestamp_ms),
        scheduled.topic,
        scheduled.queue_id,
        scheduled.queue_offset,
    )


def _delivers(copy: StoredMessage, scheduled: StoredMessage, origin: int) -> bool:
    return (
        scheduled.commit_log_offset == origin
        and scheduled.topic in (SCHEDULE_TOPIC, TIMER_TOPIC)
        and scheduled.properties.get(props.REAL_TOPIC) == copy.topic
        and scheduled.born_timestamp_ms == copy.born_timestamp_ms
        and scheduled.body_crc == copy.body_crc
        and scheduled.reconsume_times == copy.reconsume_times
    )
