"""How far behind its master a replica is in messages and in time, from the offset below which
it has stored the master's commit log; read when ``/metrics`` is scraped.

The messages are counted in the consume queues, not kept per write. Every stored message has
exactly one consume-queue entry (its commit-log offset and size), and a queue's entries follow
the commit log's order, so the messages a replica lacks are, in each queue, the entries from
the first one that ends past its offset: one binary search (O(log n) entry reads) in each
queue whose newest entry ends past the offset, one read of the newest entry of every other
queue, and nothing at all for a replica holding the whole log. The count is exact: blank
records closing a segment are no messages, and a record the replica holds only part of counts
as missing. The alternative, a ring of (end offset, messages so far) appended on every write,
would cost every send for a number read once a scrape, and be exact only at the offsets it
sampled.

The time is the age of the oldest message the replica lacks (its store timestamp on the
master): 0 for a replica holding everything, growing while a stopped or stuck replica misses
even one message, whether or not it ever held the whole log.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconsume.store import MessageStore
from reconsume.store.consume_queue import ConsumeQueue, Entry
from reconsume.store.reads import store_timestamp_at


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    messages: int
    """Messages of the master's log the replica has not wholly stored."""
    oldest_offset: int | None
    """Commit-log offset of the oldest of them; None when there is none."""


def _entry(store: MessageStore, queue: ConsumeQueue, index: int) -> Entry | None:
    """Entry ``index`` of ``queue``, read through the store (under its lock); None if it is gone
    (retention)."""
    entries = store.queue_entries(queue.topic, queue.queue_id, index, 1)
    return entries[0] if entries else None


def _first_missing(store: MessageStore, queue: ConsumeQueue, offset: int) -> tuple[int, int]:
    """The index and commit-log offset of the first entry of ``queue`` whose message ends past
    ``offset``; the index is the queue's max offset when none does."""
    low, high = queue.min_offset, queue.max_offset
    newest = _entry(store, queue, high - 1) if high > low else None
    if newest is None or newest[0] + newest[1] <= offset:
        return high, -1
    found = newest[0]
    while low < high:
        middle = (low + high) // 2
        entry = _entry(store, queue, middle)
        if entry is None or entry[0] + entry[1] <= offset:
            low = middle + 1
        else:
            high, found = middle, entry[0]
    return low, found


def replica_lag(store: MessageStore, stored_below: int) -> ReplicaLag:
    """What a replica that has stored the master's log below ``stored_below`` lacks."""
    if stored_below >= store.commitlog.write_offset:
        return ReplicaLag(0, None)
    messages, oldest = 0, None
    for queue in store.queues:
        first, offset = _first_missing(store, queue, stored_below)
        if first < queue.max_offset:
            messages += queue.max_offset - first
            oldest = offset if oldest is None else min(oldest, offset)
    return ReplicaLag(messages, oldest)


def oldest_age_s(store: MessageStore, lag: ReplicaLag, now_ms: int) -> float | None:
    """Seconds since the oldest message the replica lacks was stored: 0 when it lacks none;
    None when that message is gone meanwhile (retention)."""
    if lag.oldest_offset is None:
        return 0.0
    try:
        stamp = store_timestamp_at(store.commitlog, lag.oldest_offset)
    except ValueError:  # its segment was closed by retention while being read
        return None
    return None if stamp is None else max(now_ms - stamp, 0) / 1000
