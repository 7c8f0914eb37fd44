"""Shared helpers of the store tests: small settings, requests, log walking and the
consistency check every recovery test ends with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconsume.message import properties as props
from reconsume.message.codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
)
from reconsume.message.decode import (
    decode_record,
    peek_routing,
)
from reconsume.message.model import StoredMessage
from reconsume.store import GetStatus, MessageStore, PutRequest, StoreSettings, default_tags_code

SEGMENT = 2048
"""Smallest useful commit-log segment: a few records each, so rolling happens constantly."""


def small_settings(**changes: Any) -> StoreSettings:
    values: dict[str, Any] = {
        "commit_log_segment_bytes": SEGMENT,
        "max_message_bytes": 1024,
        "consume_queue_entries_per_file": 4,
        "checkpoint_interval_ms": 3_600_000,
        "table_flush_interval_ms": 3_600_000,
        "retention_check_interval_ms": 3_600_000,
    }
    values.update(changes)
    return StoreSettings(**values)


def request(
    topic: str,
    queue_id: int,
    body: bytes,
    *,
    tags: str | None = None,
    keys: str | None = None,
    extra: dict[str, str] | None = None,
) -> PutRequest:
    properties: dict[str, str] = {}
    if tags is not None:
        properties[props.TAGS] = tags
    if keys is not None:
        properties[props.KEYS] = keys
    properties.update(extra or {})
    return PutRequest(topic, queue_id, body, properties=props.encode_properties(properties))


def decode(record: bytes) -> StoredMessage:
    return decode_record(record, verify_crc=True)


def abandon(store: MessageStore) -> None:
    """Drop an open store the way SIGKILL would: nothing flushed, no clean checkpoint.

    The mapped pages stay in the page cache, as they do for a killed process. The store must
    have been opened with ``background=False``.
    """
    assert store._background is None
    store._closed = True
    store.queues.close()
    store.commitlog.close()
    os.close(store._lock_fd)


def forget_checkpoint(root: Path) -> None:
    """Remove the checkpoint (and its backup) so the next open scans the whole log."""
    for name in ("checkpoint", "checkpoint.bak"):
        (root / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class Walked:
    """One record met walking the commit log."""

    offset: int
    size: int
    message: StoredMessage
    properties: str
    """The encoded properties string as stored."""


def walk_commit_log(store: MessageStore) -> tuple[list[Walked], list[int]]:
    """Every record from the log's first byte to its write position, and the blank offsets.

    Fails on anything that is neither a complete, CRC-valid record nor a closing blank.
    """
    log = store.commitlog
    records: list[Walked] = []
    blanks: list[int] = []
    pos = log.min_offset
    while pos < log.write_offset:
        segment = log.segment_at(pos)
        assert segment is not None, f"no segment holds offset {pos}"
        header = log.header(pos)
        assert header is not None, f"no header at {pos}"
        size, magic = header
        if magic == BLANK_MAGIC_CODE:
            assert pos + size == segment.end, f"blank at {pos} does not close its segment"
            blanks.append(pos)
            pos = segment.end
            continue
        assert magic == MESSAGE_MAGIC_CODE, f"magic {magic:#x} at {pos}"
        assert size > 0, f"size {size} at {pos}"
        assert pos + size + 8 <= segment.end, f"record at {pos} leaves no room for a blank"
        raw = log.read(pos, size)
        assert raw is not None
        message = decode(raw)
        assert message.commit_log_offset == pos
        records.append(Walked(pos, size, message, peek_routing(raw, 0)[4]))
        pos += size
    assert pos == log.write_offset
    return records, blanks


def check_consistency(store: MessageStore, *, deleted: Mapping[str, int] | None = None) -> int:
    """Consume queues and the commit log agree exactly; returns the number of records.

    Every entry from min to max offset points at a complete record of its (topic, queue) whose
    queueOffset is the entry's index and whose tag code is recomputed identically; every record
    is indexed once, except those of a topic in ``deleted`` (topic -> the commit-log offset
    it was deleted at) written before its deletion: a deleted topic's records stay in the log.
    """
    deleted = deleted or {}
    records, _blanks = walk_commit_log(store)
    by_offset = {walked.offset: walked for walked in records}
    indexed: set[int] = set()
    for queue in store.queues:
        for index in range(queue.min_offset, queue.max_offset):
            entry = queue.entry(index)
            assert entry is not None, f"{queue.topic}/{queue.queue_id}: no entry {index}"
            phys, size, tag = entry
            walked = by_offset.get(phys)
            assert walked is not None, f"{queue.topic}/{queue.queue_id}@{index} -> {phys}"
            message = walked.message
            assert (message.topic, message.queue_id) == (queue.topic, queue.queue_id)
            assert message.queue_offset == index
            assert walked.size == size
            stamp = message.store_timestamp_ms
            assert tag == store._tags_code(message.topic, walked.properties, stamp)
            assert phys not in indexed
            indexed.add(phys)
        if queue.max_offset > queue.min_offset:
            result = store.get_messages(
                queue.topic, queue.queue_id, queue.min_offset, max_count=1 << 20, max_bytes=1 << 40
            )
            assert result.status is GetStatus.FOUND
            assert result.queue_offsets == list(range(queue.min_offset, queue.max_offset))
            for offset, record in zip(result.queue_offsets, result.records, strict=True):
                assert decode(record).queue_offset == offset
    expected = {w.offset for w in records if w.offset >= deleted.get(w.message.topic, -1)}
    assert indexed == expected, (
        f"records without an entry: {sorted(expected - indexed)[:5]}, "
        f"entries without a record: {sorted(indexed - expected)[:5]}"
    )
    return len(records)


__all__ = [
    "SEGMENT",
    "Walked",
    "abandon",
    "check_consistency",
    "decode",
    "default_tags_code",
    "forget_checkpoint",
    "request",
    "small_settings",
    "walk_commit_log",
]
