"""What the schedule and timer service tests share: the broker around the service (appends
that may be refused, the deliveries read back), a crash (the tasks vanish and the store
closes, nothing persisted past the start), and the runs the crash tests are made of: deliver
then crash, restart and stop cleanly once something holds."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reconsume.engine.delivery import DeliveryService
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.errors import StoreError
from reconsume.message.decode import decode_record
from reconsume.message.model import StoredMessage
from reconsume.store import MessageStore, PutRequest, PutResult

from ...polling import eventually_async

S = TypeVar("S", bound=DeliveryService)

FAST = ScheduleSettings(
    persist_interval_ms=3_600_000, retry_min_backoff_ms=5, retry_max_backoff_ms=20
)
"""An hour between persists (a test persists when it means to); refused puts retried after
5-20 ms."""


async def until(probe: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """:func:`eventually_async` at the pace of these tests: due times here are tens of
    milliseconds apart, so it looks every 5 ms, and a service that has not delivered within
    5 s is stuck rather than slow."""
    await eventually_async(probe, timeout_s, interval_s=0.005)


def numbered(count: int) -> list[bytes]:
    """The bodies the crash tests send: m0, m1, ..."""
    return [f"m{i}".encode() for i in range(count)]


class ServiceBroker(ABC, Generic[S]):
    """What the broker does around the service: puts wake it, deliveries are appended (and
    may be refused: the next ``refuse`` ones, or all after ``refuse_after`` more)."""

    service: S

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.refuse = 0
        self.refuse_after: int | None = None
        self.refusal: Exception = StoreError("the disk is full")

    def append(self, request: PutRequest) -> PutResult:
        if self.refuse:
            self.refuse -= 1
            raise self.refusal
        if self.refuse_after is not None:
            if self.refuse_after == 0:
                raise self.refusal
            self.refuse_after -= 1
        return self.store.append(request)

    @abstractmethod
    def put_soon(self, body: bytes) -> None:
        """Put ``body`` for delivery to ``real`` within tens of milliseconds."""

    def delivered(self, topic: str = "real") -> list[StoredMessage]:
        result = self.store.get_messages(topic, 0, 0, max_count=1000)
        return [decode_record(record) for record in result.records]

    def bodies(self) -> list[bytes]:
        return [c.body for c in self.delivered()]

    def copies(self) -> list[int]:
        """The commit-log offsets of the deliveries."""
        return [c.commit_log_offset for c in self.delivered()]


async def crash(broker: ServiceBroker[Any]) -> None:
    """The process dies: the tasks vanish, nothing persists the progress past the start."""
    for task in broker.service._tasks:
        task.cancel()
    await asyncio.gather(*broker.service._tasks, return_exceptions=True)
    broker.store.close()


async def deliver_then_crash(broker: ServiceBroker[Any], count: int) -> list[int]:
    """Deliver ``count`` messages (:func:`numbered`), then crash; the copies' offsets."""
    await broker.service.start()
    for body in numbered(count):
        broker.put_soon(body)
    await until(lambda: len(broker.delivered()) == count)
    copies = broker.copies()
    await crash(broker)
    return copies


async def persist_while_refused(broker: ServiceBroker[Any]) -> list[int]:
    """Once a put is refused, persist while the worker waits; the copies' offsets so far."""
    await until(lambda: broker.service.stats.put_failures >= 1)
    await broker.service.persist()
    return broker.copies()


async def run_until(broker: ServiceBroker[Any], done: Callable[[], bool]) -> None:
    """Start, wait until ``done``, stop cleanly (the store stays open)."""
    await broker.service.start()
    await until(done)
    await broker.service.stop()
