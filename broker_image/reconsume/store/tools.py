"""Operator-facing views of a store directory: what recovery found and what each queue holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconsume.store.store import MessageStore


@dataclass(frozen=True, slots=True)
class QueueStats:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int

    @property
    def depth(self) -> int:
        return self.max_offset - self.min_offset


def queue_stats(store: MessageStore) -> list[QueueStats]:
    return [
        QueueStats(q.topic, q.queue_id, q.min_offset, q.max_offset)
        for q in sorted(store.queues, key=lambda q: (q.topic, q.queue_id))
    ]


def describe(store: MessageStore) -> dict[str, Any]:
    """A JSON-able summary: commit-log extent, recovery report and queue depths."""
    report = store.recovery
    return {
        "root": str(store.root),
        "commitLog": {
            "minOffset": store.commitlog.min_offset,
            "maxOffset": store.commitlog.write_offset,
            "segments": len(store.commitlog.segments),
            "bytes": store.size_bytes,
        },
        "recovery": {
            "cleanShutdown": report.clean_shutdown,
            "checkpointOffset": report.checkpoint_offset,
            "scanStart": report.scan_start,
            "recordsScanned": report.records_scanned,
            "entriesRebuilt": report.entries_dispatched,
            "entriesDropped": report.entries_dropped,
            "truncatedAt": report.truncated_at,
            "truncatedReason": report.truncated_reason,
            "quarantined": report.quarantined,
            "anomalies": report.anomalies,
            "seconds": round(report.seconds, 6),
        },
        "queues": [
            {"topic": s.topic, "queueId": s.queue_id, "min": s.min_offset, "max": s.max_offset}
            for s in queue_stats(store)
        ],
        "topics": sorted(store.topics),
        "groups": sorted(store.groups),
    }
