"""Settings of the message store."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconsume.errors import InvalidArgumentError

GiB = 1 << 30
MiB = 1 << 20


class FlushMode(StrEnum):
    """When an appended message counts as durable."""

    ASYNC = "Async"
    """A background thread fsyncs every ``flush_interval_ms``; a put returns once written."""
    SYNC = "Sync"
    """A put returns after the fsync that covers it; concurrent puts share one fsync."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Sizes, durability and retention of one broker's message store."""

    commit_log_segment_bytes: int = GiB
    """Size of one commit-log segment file in bytes; a record never spans two segments."""
    consume_queue_entries_per_file: int = 300_000
    """Entries (20 bytes each) in one consume-queue file."""
    flush_mode: FlushMode = FlushMode.ASYNC
    """Sync: a put completes after fsync (group commit). Async: periodic fsync."""
    flush_interval_ms: int = 500
    """Async mode: milliseconds between background fsyncs of the commit log."""
    checkpoint_interval_ms: int = 1_000
    """Milliseconds between checkpoints (consume queues flushed, recovery start recorded)."""
    table_flush_interval_ms: int = 5_000
    """Milliseconds between persisting changed consumer and schedule offsets."""
    max_message_bytes: int = 4 * MiB
    """Largest record (header, body, topic and properties) a put accepts, in bytes."""
    retention_hours: float = 72.0
    """Commit-log segments whose last write is older than this are deleted, in hours."""
    retention_check_interval_ms: int = 60_000
    """Milliseconds between retention checks."""
    preallocate: bool = True
    """Reserve a new segment's blocks up front (fallocate) so a full disk fails at roll time."""

    def __post_init__(self) -> None:
        if self.max_message_bytes < 1024:
            raise InvalidArgumentError("max_message_bytes must be at least 1024")
        if self.commit_log_segment_bytes < self.max_message_bytes + 8:
            raise InvalidArgumentError(
                f"commit_log_segment_bytes ({self.commit_log_segment_bytes}) must be at least "
                f"max_message_bytes + 8 ({self.max_message_bytes + 8})"
            )
        if self.consume_queue_entries_per_file < 1:
            raise InvalidArgumentError("consume_queue_entries_per_file must be positive")
        for name in (
            "flush_interval_ms",
            "checkpoint_interval_ms",
            "table_flush_interval_ms",
            "retention_check_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise InvalidArgumentError(f"{name} must be positive")
        if self.retention_hours <= 0:
            raise InvalidArgumentError("retention_hours must be positive")
