"""Shared helpers of the client unit tests: stored messages and queues built directly."""

from __future__ import annotations

from typing import Any

from reconsume.client.routes import MessageQueue
from reconsume.message.address import HostAddress
from reconsume.message.model import StoredMessage

HOST = HostAddress(bytes([10, 0, 0, 1]), 10911)
QUEUE = MessageQueue("T", "broker-a", 0)


def stored(**changes: Any) -> StoredMessage:
    """A stored message of topic T; ``changes`` override any field."""
    values: dict[str, Any] = {
        "store_size": 100,
        "body_crc": 0,
        "queue_id": 0,
        "flag": 0,
        "queue_offset": 0,
        "commit_log_offset": 0x1234,
        "sys_flag": 0,
        "born_timestamp_ms": 0,
        "born_host": HOST,
        "store_timestamp_ms": 0,
        "store_host": HOST,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
        "body": b"body",
        "topic": "T",
        "properties": {},
    }
    values.update(changes)
    return StoredMessage(**values)


def at(*offsets: int) -> list[StoredMessage]:
    """Messages of QUEUE at these queue offsets, in the order given."""
    return [stored(queue_offset=o, commit_log_offset=1000 + o) for o in offsets]
