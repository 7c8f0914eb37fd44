"""Finding, after a restart, which schedule entries were already delivered before it.

The schedule service persists, per level, the offset of the first entry whose delivery is
not yet known durable (``P``) and a commit-log offset ``W`` below which no delivery of an
entry at or past ``P`` can lie (the first unconfirmed delivery, or the log's end when there
is none). After a crash the level resumes at ``P``, so the entries delivered since the last
persist are delivered again: at-least-once. Every delivered message carries SCHEDULE_ORIGIN,
the commit-log offset of its schedule record; scanning the recovered log from the smallest
``W`` therefore finds every entry whose earlier delivery survived, and re-delivering one of
those is a duplicate the service counts. A copy that did not survive the crash (an OS crash
under Async flush) is not found, and its re-delivery is not a duplicate either.
"""

from __future__ import annotations

from reconsume.message import properties as props
from reconsume.message.decode import peek_routing
from reconsume.store import MessageStore


def delivered_origins(store: MessageStore, start_offset: int) -> set[int]:
    """The SCHEDULE_ORIGIN values of the records from commit-log offset ``start_offset`` (a
    record boundary) to the end of the log. Run before anything appends (at start-up)."""
    found: set[int] = set()
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
        origin = props.find_property(peek_routing(record, 0)[4], props.SCHEDULE_ORIGIN)
        if origin is not None and origin.isdigit():
            found.add(int(origin))
        offset += len(record)
    return found
