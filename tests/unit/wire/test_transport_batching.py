"""Answers to the requests of one read leave in one write; an answer made later (by an async
handler) leaves on its own, after them; what a read's handlers write to other connections of
the dispatcher leaves once per connection when the read is done."""

from __future__ import annotations

import asyncio

from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.frame import FrameReader, encode_frame
from reconsume.wire.transport import Connection

from .recording import RecordingTransport


def _echo(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
    return request.respond(ResponseCode.SUCCESS, ext_fields={"n": request.ext_fields["n"]})


async def _later(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
    await asyncio.sleep(0)
    return request.respond(ResponseCode.SUCCESS, ext_fields={"n": request.ext_fields["n"]})


def _request(code: int, n: int) -> bytes:
    return encode_frame(RemotingCommand.request(code, {"n": str(n)}))


def _answered(writes: list[bytes]) -> list[list[str]]:
    """The ``n`` of the answers in each write."""
    return [[c.ext_fields["n"] for c in FrameReader().feed(w)] for w in writes]


def test_requests_of_one_read_are_answered_in_one_write() -> None:
    async def scenario() -> list[list[str]]:
        dispatcher = Dispatcher("test")
        dispatcher.register(RequestCode.HEART_BEAT, _echo)
        dispatcher.register(RequestCode.QUERY_MESSAGE, _later)
        transport = RecordingTransport()
        connection = Connection(dispatcher)
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.data_received(
            _request(RequestCode.HEART_BEAT, 1)
            + _request(RequestCode.QUERY_MESSAGE, 2)
            + _request(RequestCode.HEART_BEAT, 3)
        )
        connection.data_received(_request(RequestCode.HEART_BEAT, 4))
        for _ in range(100):  # the async handler's task answers on a later turn of the loop
            if len(transport.writes) == 3:
                break
            await asyncio.sleep(0)
        return _answered(transport.writes)

    assert asyncio.run(scenario()) == [["1", "3"], ["4"], ["2"]]


def test_a_guard_that_fails_answers_system_error_and_the_connection_goes_on() -> None:
    def guard(request: RemotingCommand, _connection: Connection) -> RemotingCommand | None:
        if request.ext_fields["n"] == "1":
            raise ValueError("unreadable header")
        return None

    async def scenario() -> list[RemotingCommand]:
        dispatcher = Dispatcher("test")
        dispatcher.register(RequestCode.HEART_BEAT, _echo)
        dispatcher.guard = guard
        transport = RecordingTransport()
        connection = Connection(dispatcher)
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.data_received(_request(RequestCode.HEART_BEAT, 1))
        connection.data_received(_request(RequestCode.HEART_BEAT, 2))
        return [c for w in transport.writes for c in FrameReader().feed(w)]

    failed, served = asyncio.run(scenario())
    assert failed.code == ResponseCode.SYSTEM_ERROR
    assert "unreadable header" in (failed.remark or "")
    assert served.code == ResponseCode.SUCCESS
    assert served.ext_fields["n"] == "2"


def test_work_put_off_until_a_read_is_done_runs_once_after_all_its_requests() -> None:
    """What a master does with its held replica requests: every send of one read appended
    before they are answered, once."""

    async def scenario() -> tuple[list[str], list[str]]:
        events: list[str] = []
        dispatcher = Dispatcher("test")

        def after() -> None:
            events.append("after")

        def failing() -> None:
            events.append("failing")
            raise RuntimeError("a callback that fails")

        def handle(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
            events.append(request.ext_fields["n"])
            dispatcher.after_read(failing)
            dispatcher.after_read(after)
            return _echo(request, _connection)

        dispatcher.register(RequestCode.HEART_BEAT, handle)
        connection = Connection(dispatcher)
        connection.connection_made(RecordingTransport())  # type: ignore[arg-type]
        connection.data_received(
            _request(RequestCode.HEART_BEAT, 1) + _request(RequestCode.HEART_BEAT, 2)
        )
        connection.data_received(_request(RequestCode.HEART_BEAT, 3))
        outside: list[str] = []
        dispatcher.after_read(lambda: outside.append("at once"))
        return events, outside

    events, outside = asyncio.run(scenario())
    assert events == ["1", "2", "failing", "after", "3", "failing", "after"]
    assert outside == ["at once"]


def test_answers_a_read_releases_on_other_connections_leave_in_one_write_each() -> None:
    """A replica's acknowledgement releasing the Sync-replicated sends of several producers:
    each producer's answers in one write; the answer to a read of one request leaves at once
    (it is that connection's one write), and so does what its handler puts off until the read
    is done (a master's answers to its replicas, which the next writes wait for): nothing of
    the read comes after it."""

    async def scenario() -> tuple[list[list[str]], list[list[str]], list[list[str]], list[str]]:
        dispatcher = Dispatcher("test")
        waiting: list[tuple[Connection, RemotingCommand]] = []
        order: list[str] = []
        replica_transport = RecordingTransport()

        def hold(request: RemotingCommand, connection: Connection) -> None:
            waiting.append((connection, request))

        def release(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
            for connection, held in waiting:
                connection.reply(held, _echo(held, connection))
            waiting.clear()
            dispatcher.after_read(lambda: order.append(f"after, {_writes()} writes so far"))
            return _echo(request, _connection)

        dispatcher.register(RequestCode.SEND_MESSAGE, hold)
        dispatcher.register(RequestCode.REPLICATE_LOG, release)
        producers = [RecordingTransport(), RecordingTransport()]
        connections = [Connection(dispatcher) for _ in producers]
        for connection, transport in zip(connections, producers, strict=True):
            connection.connection_made(transport)  # type: ignore[arg-type]
        replica = Connection(dispatcher)
        replica.connection_made(replica_transport)  # type: ignore[arg-type]

        def _writes() -> int:
            return sum(len(t.writes) for t in [*producers, replica_transport])

        connections[0].data_received(
            _request(RequestCode.SEND_MESSAGE, 1) + _request(RequestCode.SEND_MESSAGE, 2)
        )
        connections[1].data_received(_request(RequestCode.SEND_MESSAGE, 3))
        replica.data_received(_request(RequestCode.REPLICATE_LOG, 9))
        # outside a read, a write leaves at once
        connections[1].reply(
            RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": "4"}),
            RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": "4"}),
        )
        return (
            _answered(producers[0].writes),
            _answered(producers[1].writes),
            _answered(replica_transport.writes),
            order,
        )

    first, second, replica, order = asyncio.run(scenario())
    assert first == [["1", "2"]]
    assert second == [["3"], ["4"]]
    assert replica == [["9"]]
    # the replica's read holds one request: the work put off until the read is done ran at
    # once, before the producers' answers (and the replica's own) left
    assert order == ["after, 0 writes so far"]


def test_a_read_of_several_requests_puts_work_off_to_its_end_and_uncork_writes_early() -> None:
    """What a handler puts off with ``after_read`` waits for the rest of a read of several
    requests (their appends answered together); ``uncork`` writes what the read has
    written so far at once, and what it writes after is held until its end again."""

    async def scenario() -> tuple[list[str], list[list[list[str]]]]:
        dispatcher = Dispatcher("test")
        events: list[str] = []
        other = RecordingTransport()
        target = Connection(dispatcher)
        target.connection_made(other)  # type: ignore[arg-type]
        seen: list[list[list[str]]] = []

        def after() -> None:
            events.append(f"after, {len(other.writes)} writes")

        def handle(request: RemotingCommand, _connection: Connection) -> None:
            n = request.ext_fields["n"]
            target.send(_echo(request, target))
            if n == "1":
                dispatcher.uncork()
                seen.append(_answered(other.writes))
            dispatcher.after_read(after)  # asked twice, run once
            events.append(n)

        dispatcher.register(RequestCode.HEART_BEAT, handle)
        connection = Connection(dispatcher)
        connection.connection_made(RecordingTransport())  # type: ignore[arg-type]
        connection.data_received(
            _request(RequestCode.HEART_BEAT, 1) + _request(RequestCode.HEART_BEAT, 2)
        )
        seen.append(_answered(other.writes))
        return events, seen

    events, seen = asyncio.run(scenario())
    assert events == ["1", "2", "after, 1 writes"]
    assert seen == [[["1"]], [["1"], ["2"]]]
