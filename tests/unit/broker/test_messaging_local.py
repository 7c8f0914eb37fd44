"""The gRPC service's way into the broker's handlers: one LocalConnection per gRPC peer, and
requests answered at once or later."""

from __future__ import annotations

import asyncio

import pytest

from reconsume.broker.flush_answers import PreparedReply
from reconsume.broker.messaging.local import LocalConnection, LocalConnections
from reconsume.broker.messaging.produce import PRODUCER_GROUP, send_request
from reconsume.errors import RemotingTimeoutError
from reconsume.message.names import DEFAULT_TOPIC
from reconsume.wire.broker_headers import SendMessageRequestHeader
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.transport import Connection
from reconsume.wire.v2 import definition_pb2 as pb

NOW, LATER, NEVER = 1, 2, 3


def _dispatcher(release: asyncio.Event) -> Dispatcher:
    dispatcher = Dispatcher("broker")

    def now(request: RemotingCommand, connection: Connection) -> RemotingCommand:
        return request.respond(ResponseCode.SUCCESS, connection.peer)

    async def later(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        await release.wait()
        return request.respond(ResponseCode.SUCCESS, "later")

    def never(_request: RemotingCommand, _connection: Connection) -> None:
        return None

    dispatcher.register(NOW, now)
    dispatcher.register(LATER, later)
    dispatcher.register(NEVER, never)
    return dispatcher


def test_one_connection_per_peer_and_the_table_starts_over_past_its_limit() -> None:
    async def scenario() -> None:
        connections = LocalConnections(_dispatcher(asyncio.Event()), limit=2)
        first = connections.of("ipv4:10.0.0.1:5000")
        assert connections.of("ipv4:10.0.0.1:5000") is first
        assert first.peer == "10.0.0.1:5000"  # the records' born host
        second = connections.of("ipv6:[::1]:6000")
        assert second is not first
        assert len(connections) == 2
        connections.of("ipv4:10.0.0.2:5000")
        assert len(connections) == 1
        assert connections.of("ipv4:10.0.0.1:5000") is not first

    asyncio.run(scenario())


def test_requests_answered_at_once_later_and_never_share_one_connection() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        connection = LocalConnection(_dispatcher(release), ("10.0.0.1", 5000))
        held = asyncio.ensure_future(connection.request(RemotingCommand.request(LATER), 5.0))
        answer = await connection.request(RemotingCommand.request(NOW), 5.0)
        assert answer.remark == "10.0.0.1:5000"
        assert not held.done()
        release.set()
        assert (await held).remark == "later"
        with pytest.raises(RemotingTimeoutError):
            await connection.request(RemotingCommand.request(NEVER), 0.01)

    asyncio.run(scenario())


def test_a_write_answered_when_stored_reaches_the_grpc_call_that_waits_for_it() -> None:
    """A send waiting for its fsync or replicas has its answer prepared while it waits
    (``PreparedReply``, as ``BrokerContext.reply_when_stored`` makes it); a local connection
    takes answers as commands, not frames, so the release builds and hands it in."""

    async def scenario() -> None:
        waiting: list[PreparedReply] = []
        arrived = asyncio.Event()

        def stored_later(request: RemotingCommand, connection: Connection) -> None:
            reply = PreparedReply(connection, request, lambda code: request.respond(code, "stored"))
            reply.prepare()
            waiting.append(reply)
            arrived.set()

        dispatcher = Dispatcher("broker")
        dispatcher.register(LATER, stored_later)
        connection = LocalConnection(dispatcher, ("10.0.0.1", 5000))
        call = asyncio.ensure_future(connection.request(RemotingCommand.request(LATER), 5.0))
        await asyncio.wait_for(arrived.wait(), 5)
        assert not call.done()
        waiting[0](ResponseCode.SUCCESS)
        answer = await call
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "stored")

    asyncio.run(scenario())


def test_a_send_carries_the_header_fields_a_4x_send_would() -> None:
    message = pb.Message(
        topic=pb.Resource(name="orders"),
        body=b"payload",
        system_properties=pb.SystemProperties(message_id="id-1", queue_id=5),
    )
    message.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_123)
    header = SendMessageRequestHeader.from_ext_fields(send_request(message, 1000).ext_fields)
    assert header.producer_group == PRODUCER_GROUP
    assert (header.topic, header.queue_id) == ("orders", 5)
    assert header.born_timestamp == 1_700_000_000_123
    assert (header.default_topic, header.default_topic_queue_nums) == (DEFAULT_TOPIC, 4)
    assert (header.sys_flag, header.flag, header.reconsume_times) == (0, 0, 0)
    assert (header.batch, header.unit_mode) == (False, False)
