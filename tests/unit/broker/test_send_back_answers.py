"""A send-back under Sync replication is answered as a send is: by the replica's
acknowledgement that releases its retry, SYSTEM_ERROR naming the status (SLAVE_NOT_AVAILABLE,
FLUSH_SLAVE_TIMEOUT) when none comes — as Apache RocketMQ's send-back answers any status but
PUT_OK — with the retry stored either way, and counted as sent back only once stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from reconsume.broker.context import BrokerContext
from reconsume.broker.replicas import ReplicaSet
from reconsume.broker.send_back import SendBackProcessor
from reconsume.engine.delays import schedule_queue_id
from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.store.requests import PutRequest
from reconsume.wire.broker_headers import ConsumerSendMsgBackRequestHeader
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.frame import FrameReader, encode_frame
from reconsume.wire.transport import Connection

from ...polling import eventually_async
from ._context import sync_replicated_context

GROUP = "g"


class Replies:
    """The methods of a connection a send-back answers through: at once, or from a frame
    encoded while it waited."""

    answers_as_frames = True

    def __init__(self) -> None:
        self.answers: list[RemotingCommand] = []

    def reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        assert response.opaque == request.opaque
        self.answers.append(response)

    def encode_reply(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        response.opaque = request.opaque
        return encode_frame(response)

    def send_encoded(self, frame: bytes) -> None:
        self.answers.extend(FrameReader().feed(frame))


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    with sync_replicated_context(tmp_path, sync_flush_timeout_ms=50) as context:
        store = context.store
        context.replicas = ReplicaSet(
            log_end=lambda: store.commitlog.write_offset, sync=True, lag_max_s=2.0,
            accept_alone=False,
        )  # fmt: skip
        yield context


def send_back(context: BrokerContext, replies: Replies) -> RemotingCommand | None:
    """Send back a message just stored in topic T."""
    stored = context.append(PutRequest(topic="T", queue_id=0, body=b"x", properties=""))
    header = ConsumerSendMsgBackRequestHeader(
        offset=stored.commit_log_offset, group=GROUP, delay_level=0
    )
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    return SendBackProcessor(context).send_back(request, cast(Connection, replies))


def retries_stored(context: BrokerContext) -> int:
    """How many retries wait in the schedule's queues."""
    store = context.store
    levels = context.delays.levels()
    return sum(store.max_offset(SCHEDULE_TOPIC, schedule_queue_id(level)) for level in levels)


def test_a_send_back_is_answered_by_the_acknowledgement_of_its_retry(
    context: BrokerContext,
) -> None:
    async def scenario() -> None:
        replicas = context.replicas
        assert replicas is not None
        end = context.store.commitlog.write_offset
        replicas.seen("a", "x", end, end, now_s=0.0)  # in sync
        replies = Replies()
        assert send_back(context, replies) is None  # waits for the replica
        assert replies.answers == []
        assert context.stats.send_backs == {}
        assert retries_stored(context) == 1
        end = context.store.commitlog.write_offset
        replicas.seen("a", "x", end, end, now_s=0.1)
        assert [answer.code for answer in replies.answers] == [ResponseCode.SUCCESS]
        assert context.stats.send_backs == {(GROUP, "T"): 1}

    asyncio.run(scenario())


def test_a_send_back_nobody_acknowledges_names_the_status_and_keeps_its_retry(
    context: BrokerContext,
) -> None:
    async def scenario() -> None:
        replicas = context.replicas
        assert replicas is not None
        refused = Replies()
        assert send_back(context, refused) is None
        assert [(a.code, a.remark) for a in refused.answers] == [
            (ResponseCode.SYSTEM_ERROR, "SLAVE_NOT_AVAILABLE")
        ]
        end = context.store.commitlog.write_offset
        replicas.seen("a", "x", end, end, now_s=0.0)  # in sync, then silent
        late = Replies()
        assert send_back(context, late) is None
        await eventually_async(lambda: late.answers, 5, "the 50 ms sync_flush_timeout_ms passed")
        assert [(a.code, a.remark) for a in late.answers] == [
            (ResponseCode.SYSTEM_ERROR, "FLUSH_SLAVE_TIMEOUT")
        ]
        assert retries_stored(context) == 2  # both retries stay stored
        assert context.stats.send_backs == {}  # neither counted as sent back

    asyncio.run(scenario())
