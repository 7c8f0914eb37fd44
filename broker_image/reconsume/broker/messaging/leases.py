"""What the pop engine (:mod:`reconsume.broker.messaging.pop`) hands out and takes back: a
:class:`Lease` per message handed out, the :class:`QueueCursor` of a (group, topic, queue), and
the receipt :class:`Handle` a 5.x client acknowledges or extends a lease with, whose text names
this broker, the queue, the offset and the lease's token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconsume.broker.messaging.status import Refused
from reconsume.message.model import StoredMessage
from reconsume.wire.v2 import definition_pb2 as pb

HANDLE_VERSION = "p1"
MIN_INVISIBLE_MS = 1_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
"""Apache RocketMQ's proxy bounds (``minInvisibleTimeMillsForRecv``, 12 h)."""


@dataclass(slots=True)
class Lease:
    """One message handed out and not yet done."""

    group: str
    topic: str
    queue_id: int
    offset: int
    commit_log_offset: int
    token: int
    deadline_ms: int
    attempt: int
    """Its delivery attempt, from 1."""
    client_id: str = ""
    renew_until_ms: int = 0
    """A push consumer's lease (``auto_renew``) is extended while its client is connected,
    until then (the group's consume timeout); 0: never."""


@dataclass(slots=True)
class QueueCursor:
    next_offset: int
    leases: dict[int, Lease] = field(default_factory=dict)
    fifo_attempts: dict[int, int] = field(default_factory=dict)
    """A FIFO group's expired attempts per offset (its messages are redelivered in place)."""

    def committed(self) -> int:
        return min(self.leases, default=self.next_offset)


@dataclass(frozen=True, slots=True)
class Handle:
    """What a receipt handle names."""

    topic: str
    queue_id: int
    offset: int
    token: int

    def encode(self, broker: str) -> str:
        return f"{HANDLE_VERSION} {broker} {self.topic} {self.queue_id} {self.offset} {self.token}"

    @classmethod
    def decode(cls, text: str) -> Handle:
        parts = text.split(" ")
        if len(parts) != 6 or parts[0] != HANDLE_VERSION:
            raise Refused(pb.INVALID_RECEIPT_HANDLE, "not a receipt handle of this broker")
        try:
            return cls(parts[2], int(parts[3]), int(parts[4]), int(parts[5]))
        except ValueError as exc:
            raise Refused(pb.INVALID_RECEIPT_HANDLE, f"malformed receipt handle: {exc}") from exc


@dataclass(slots=True)
class Received:
    message: StoredMessage
    lease: Lease


def invisible_ms(requested_ms: int, minimum_ms: int = MIN_INVISIBLE_MS) -> int:
    """``requested_ms`` when it is within [``minimum_ms``, 12 h]; else ILLEGAL_INVISIBLE_TIME.
    A receive's duration must leave time to consume (1 s at least); a changed one may be 0
    (a push consumer's backoff below a second: visible again at once)."""
    if not minimum_ms <= requested_ms <= MAX_INVISIBLE_MS:
        raise Refused(
            pb.ILLEGAL_INVISIBLE_TIME,
            f"the invisible duration {requested_ms} ms is outside "
            f"[{minimum_ms}, {MAX_INVISIBLE_MS}] ms",
        )
    return requested_ms
