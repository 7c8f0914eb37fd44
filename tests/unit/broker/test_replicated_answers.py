"""A send under Sync replication is answered by whatever releases its write: at once when a
replica acknowledges it (under Sync flush, after its fsync), SLAVE_NOT_AVAILABLE with nobody in
sync, FLUSH_SLAVE_TIMEOUT when the acknowledgement does not come in time — once each."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.broker.context import BrokerContext
from reconsume.broker.replicas import ReplicaSet
from reconsume.store import FlushMode, StoreSettings
from reconsume.store.requests import PutRequest, PutResult
from reconsume.wire.codes import ResponseCode

from ...polling import eventually_async
from ._context import sync_replicated_context


def put() -> PutRequest:
    return PutRequest(topic="T", queue_id=0, body=b"x", properties="")


def stored(end: int) -> PutResult:
    return PutResult(commit_log_offset=end - 100, size=100, queue_offset=0, store_timestamp_ms=0)


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    with sync_replicated_context(tmp_path, sync_flush_timeout_ms=50) as context:
        context.replicas = ReplicaSet(
            log_end=lambda: 1000, sync=True, lag_max_s=2.0, accept_alone=False
        )
        yield context


def test_an_acknowledged_write_is_answered_by_the_acknowledgement(context: BrokerContext) -> None:
    async def scenario() -> None:
        replicas = context.replicas
        assert replicas is not None
        replicas.seen("a", "x", 1000, 1000, now_s=0.0)  # in sync
        answers: list[int] = []
        context.answer_when_stored(stored(1100), answers.append)
        assert answers == []
        replicas.seen("a", "x", 1100, 1100, now_s=0.1)
        assert answers == [ResponseCode.SUCCESS]  # told by the acknowledgement itself
        context.answer_when_stored(stored(1050), answers.append)
        assert answers == [ResponseCode.SUCCESS, ResponseCode.SUCCESS]  # already there

    asyncio.run(scenario())


def test_a_write_nobody_acknowledges_is_refused_or_times_out_once(context: BrokerContext) -> None:
    async def scenario() -> None:
        replicas = context.replicas
        assert replicas is not None
        refused: list[int] = []
        context.answer_when_stored(stored(1100), refused.append)
        assert refused == [ResponseCode.SLAVE_NOT_AVAILABLE]
        replicas.seen("a", "x", 1000, 1000, now_s=0.0)
        late: list[int] = []
        context.answer_when_stored(stored(1200), late.append)
        await eventually_async(lambda: late, 5, "the 50 ms sync_flush_timeout_ms passed")
        assert late == [ResponseCode.FLUSH_SLAVE_TIMEOUT]
        replicas.seen("a", "x", 1200, 1200, now_s=0.1)
        assert late == [ResponseCode.FLUSH_SLAVE_TIMEOUT]  # not answered twice

    asyncio.run(scenario())


def test_under_sync_flush_the_fsync_comes_first_then_the_acknowledgement(
    context: BrokerContext,
) -> None:
    async def scenario() -> None:
        store = context.store
        replicas = context.replicas = ReplicaSet(
            log_end=lambda: store.commitlog.write_offset, sync=True, lag_max_s=2.0,
            accept_alone=False,
        )  # fmt: skip
        replicas.seen("a", "x", 0, 0, now_s=0.0)  # in sync: holds the whole (empty) log
        result = context.append(put())  # this store flushes when asked: no flush thread
        answers: list[int] = []
        context.answer_when_stored(result, answers.append)
        assert context.store.group_commit.flushed >= result.end_offset
        assert answers == []  # fsynced, not yet on the replica
        replicas.seen("a", "x", result.end_offset, result.end_offset, now_s=0.1)
        assert answers == [ResponseCode.SUCCESS]

    context.store.settings = StoreSettings(flush_mode=FlushMode.SYNC)
    asyncio.run(scenario())


def test_writes_waiting_for_the_replicas_share_one_timer_and_leave_as_answered(
    context: BrokerContext,
) -> None:
    async def scenario() -> None:
        replicas = context.replicas
        assert replicas is not None
        replicas.seen("a", "x", 1000, 1000, now_s=0.0)
        loop = asyncio.get_running_loop()
        timers_before = len(loop._scheduled)  # type: ignore[attr-defined]
        answers: list[tuple[int, int]] = []
        for end in range(1100, 2100, 100):
            context.answer_when_stored(
                stored(end), lambda code, end=end: answers.append((end, code))
            )
        assert len(loop._scheduled) == timers_before + 1  # type: ignore[attr-defined]
        replicas.seen("a", "x", 1500, 1500, now_s=0.1)  # the first five acknowledged
        assert answers == [(end, ResponseCode.SUCCESS) for end in range(1100, 1600, 100)]
        context.answer_when_stored(stored(2100), lambda code: answers.append((2100, code)))
        assert len(context.replica_answers) == 6  # the answered ones left from the head
        await eventually_async(lambda: len(answers) == 11, 5, "the 50 ms timeout passed")
        late = [(end, ResponseCode.FLUSH_SLAVE_TIMEOUT) for end in range(1600, 2200, 100)]
        assert answers[5:] == late
        assert len(context.replica_answers) == 0

    asyncio.run(scenario())
