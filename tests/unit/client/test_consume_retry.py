"""What the consume services do with failures, with the send-back replaced by a recording
function: offsets advance past messages sent back, never past ones waiting for a local retry;
broadcasting drops; orderly pauses are clamped; retry sends carry their state in the header."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reconsume.client.concurrent import ConcurrentService
from reconsume.client.listener import ConcurrentContext, ConsumeStatus, MessageModel
from reconsume.client.offsets import LocalOffsetStore
from reconsume.client.orderly import suspend_s
from reconsume.client.process_queue import ProcessQueue
from reconsume.client.producer import retry_state
from reconsume.client.stats import ConsumerStats
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.model import StoredMessage
from tests.polling import eventually_async
from tests.unit.client._helpers import QUEUE, at


class SendBackRecorder:
    """Takes messages back while ``accept`` is true."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.calls: list[tuple[int, str, int]] = []

    async def __call__(self, message: StoredMessage, broker_name: str, level: int) -> bool:
        self.calls.append((message.queue_offset, broker_name, level))
        return self.accept


def run_service(
    tmp_path: Path,
    model: MessageModel,
    send_back: SendBackRecorder,
    done: Callable[[ConsumerStats], bool],
) -> tuple[ConcurrentService, LocalOffsetStore, list[tuple[int, int]]]:
    """Consume offsets 0-3, failing each first delivery, with a 10 ms local retry, until
    ``done``."""
    seen: list[tuple[int, int]] = []

    async def listener(messages: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        seen.extend((m.queue_offset, m.reconsume_times) for m in messages)
        context.delay_level_when_next_consume = 2
        if messages[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    offsets = LocalOffsetStore(tmp_path)

    async def scenario() -> ConcurrentService:
        pq = ProcessQueue(QUEUE, 100)
        messages = at(0, 1, 2, 3)
        pq.put(messages, 4)
        with ThreadPoolExecutor(1) as executor:
            service = ConcurrentService(
                listener,
                model=model,
                offsets=offsets,
                send_back=send_back,
                restore=lambda m: m,
                batch_size=2,
                concurrency=4,
                executor=executor,
                local_retry_delay_s=0.01,
            )
            service.submit(messages, pq)
            await eventually_async(
                lambda: done(service.stats),
                5,
                "done(service.stats)",
                interval_s=0.005,
                detail=lambda: f"deliveries (offset, reconsume times): {seen}",
            )
            await service.drain(1)
        return service

    return asyncio.run(scenario()), offsets, seen


def test_sent_back_messages_count_as_consumed(tmp_path: Path) -> None:
    send_back = SendBackRecorder(accept=True)
    service, offsets, seen = run_service(
        tmp_path, MessageModel.CLUSTERING, send_back, lambda s: s.failed == 4
    )
    assert sorted(send_back.calls) == [(o, QUEUE.broker_name, 2) for o in range(4)]
    assert sorted(seen) == [(o, 0) for o in range(4)]  # never consumed again here
    assert offsets.current(QUEUE) == 4
    assert (service.stats.failed, service.stats.local_retries) == (4, 0)


def test_messages_nobody_took_back_are_consumed_again_locally(tmp_path: Path) -> None:
    send_back = SendBackRecorder(accept=False)
    service, offsets, seen = run_service(
        tmp_path, MessageModel.CLUSTERING, send_back, lambda s: s.consumed == 4
    )
    assert sorted(seen) == sorted([(o, 0) for o in range(4)] + [(o, 1) for o in range(4)])
    assert offsets.current(QUEUE) == 4  # once the local retries succeeded
    stats = service.stats
    assert (stats.consumed, stats.failed, stats.local_retries) == (4, 4, 4)


def test_broadcasting_failures_are_dropped_never_sent_back(tmp_path: Path) -> None:
    send_back = SendBackRecorder(accept=True)
    service, offsets, seen = run_service(
        tmp_path, MessageModel.BROADCASTING, send_back, lambda s: s.dropped == 4
    )
    assert send_back.calls == []
    assert sorted(seen) == [(o, 0) for o in range(4)]
    assert service.stats.dropped == 4
    assert offsets.current(QUEUE) == 4


@pytest.mark.parametrize(
    ("requested_ms", "default_ms", "expected_s"),
    [
        (-1, 1000, 1.0),
        (-1, 1, 0.01),
        (0, 1000, 0.01),
        (250, 1000, 0.25),
        (30_000, 1000, 30.0),
        (60_000, 1000, 30.0),
        (-1, 10**9, 30.0),
    ],
)
def test_orderly_pauses_are_clamped_to_10ms_30s(
    requested_ms: int, default_ms: int, expected_s: float
) -> None:
    assert suspend_s(requested_ms, default_ms) == expected_s


def test_a_retry_send_moves_its_reconsume_times_into_the_header() -> None:
    properties = {props.RECONSUME_TIME: "3", props.MAX_RECONSUME_TIMES: "5", "k": "v"}
    assert retry_state("%RETRY%g", properties) == (3, 5)
    assert properties == {"k": "v"}
    plain = {props.RECONSUME_TIME: "3"}
    assert retry_state("orders", plain) == (None, None)
    assert plain == {props.RECONSUME_TIME: "3"}
    assert retry_state("%RETRY%g", {}) == (None, None)
    with pytest.raises(InvalidArgumentError, match="RECONSUME_TIME"):
        retry_state("%RETRY%g", {props.RECONSUME_TIME: "x"})
