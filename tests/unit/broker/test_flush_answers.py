"""Writes under Sync flush answered by their fsync's completion: in one release on the event
loop for however many the flush thread completes, as one read (one write per connection);
FLUSH_DISK_TIMEOUT once when the fsync is late, SERVICE_NOT_AVAILABLE when it failed — each
write answered once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future

from reconsume.broker.flush_answers import FlushAnswers, PreparedReply
from reconsume.errors import StoreError
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.frame import FrameReader
from reconsume.wire.transport import Connection

from ...polling import eventually_async
from ..wire.recording import RecordingTransport


class _Flush:
    """The group commit's side: a future per requested offset, completed by the test."""

    def __init__(self) -> None:
        self.futures: dict[int, Future[None]] = {}
        self.reads = 0

    def durable(self, end_offset: int) -> Future[None]:
        return self.futures.setdefault(end_offset, Future())

    def as_read(self, callback: Callable[[], None]) -> None:
        self.reads += 1
        callback()


def test_the_writes_one_fsync_made_durable_are_answered_in_one_release() -> None:
    async def scenario() -> tuple[list[tuple[int, int]], int]:
        flush = _Flush()
        answers = FlushAnswers(flush.durable, flush.as_read)
        told: list[tuple[int, int]] = []
        for offset in (100, 200, 300):
            answers.wait(offset, 5.0, lambda code, offset=offset: told.append((offset, code)))
        assert told == []
        assert len(answers) == 3

        def fsync_done() -> None:  # the flush thread releases the first two
            for offset in (100, 200):
                flush.futures[offset].set_result(None)

        thread = threading.Thread(target=fsync_done)
        thread.start()
        thread.join()
        await eventually_async(lambda: len(told) == 2, 5, "the release ran on the loop")
        assert len(answers) == 1
        flush.futures[300].set_result(None)
        await eventually_async(lambda: len(told) == 3, 5, "the last write released")
        return told, flush.reads

    told, reads = asyncio.run(scenario())
    assert told == [(100, 0), (200, 0), (300, 0)]
    assert reads == 2  # one release for the two completions of one fsync


def test_a_write_already_durable_is_answered_at_once() -> None:
    async def scenario() -> list[int]:
        flush = _Flush()
        flush.durable(100).set_result(None)
        answers = FlushAnswers(flush.durable, flush.as_read)
        told: list[int] = []
        answers.wait(100, 5.0, told.append)
        return told

    assert asyncio.run(scenario()) == [ResponseCode.SUCCESS]


def test_a_late_fsync_answers_flush_disk_timeout_once() -> None:
    async def scenario() -> list[int]:
        flush = _Flush()
        answers = FlushAnswers(flush.durable, flush.as_read)
        told: list[int] = []
        answers.wait(100, 0.02, told.append)
        await eventually_async(lambda: told, 5, "the 20 ms timeout passed")
        flush.futures[100].set_result(None)  # the fsync completes after all
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(answers) == 0
        return told

    assert asyncio.run(scenario()) == [ResponseCode.FLUSH_DISK_TIMEOUT]


def test_a_failed_fsync_answers_service_not_available_even_out_of_order() -> None:
    async def scenario() -> list[tuple[int, int]]:
        flush = _Flush()
        answers = FlushAnswers(flush.durable, flush.as_read)
        told: list[tuple[int, int]] = []
        for offset in (100, 200):
            answers.wait(offset, 5.0, lambda code, offset=offset: told.append((offset, code)))
        # the log was cut back below the second write; the first still waits for its fsync
        flush.futures[200].set_exception(StoreError("the log was cut back to offset 150"))
        await eventually_async(lambda: told, 5, "the failed write answered")
        assert len(answers) == 1
        flush.futures[100].set_result(None)
        await eventually_async(lambda: len(told) == 2, 5, "the first write answered")
        return told

    assert asyncio.run(scenario()) == [
        (200, ResponseCode.SERVICE_NOT_AVAILABLE),
        (100, ResponseCode.SUCCESS),
    ]


def test_an_answer_that_fails_does_not_keep_the_others_waiting() -> None:
    async def scenario() -> list[int]:
        flush = _Flush()
        answers = FlushAnswers(flush.durable, flush.as_read)
        told: list[int] = []

        def broken(_code: int) -> None:
            raise ConnectionError("the producer left")

        answers.wait(100, 5.0, broken)
        answers.wait(200, 5.0, told.append)
        flush.futures[100].set_result(None)
        flush.futures[200].set_result(None)
        await eventually_async(lambda: told, 5, "the second write answered")
        return told

    assert asyncio.run(scenario()) == [ResponseCode.SUCCESS]


def test_a_prepared_reply_writes_what_it_built_while_waiting_and_builds_others_when_told() -> None:
    """SUCCESS leaves as the frame ``prepare`` encoded (built once); another code is built
    when told; told before ``prepare`` (released at once), nothing is built twice; a oneway
    request gets no answer."""

    async def scenario() -> tuple[list[int], list[list[tuple[int, int, str]]]]:
        built: list[int] = []

        def reply_for(code: int) -> tuple[PreparedReply, RecordingTransport]:
            transport = RecordingTransport()
            connection = Connection(Dispatcher("test"))
            connection.connection_made(transport)  # type: ignore[arg-type]
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"n": str(code)})

            def build(answered: int) -> RemotingCommand:
                built.append(answered)
                return request.respond(answered, None, {"n": str(code)})

            return PreparedReply(connection, request, build), transport

        def frames(transport: RecordingTransport) -> list[tuple[int, int, str]]:
            return [
                (c.code, c.opaque, c.ext_fields["n"])
                for w in transport.writes
                for c in FrameReader().feed(w)
            ]

        ok, ok_transport = reply_for(1)
        ok.prepare()
        assert built == [ResponseCode.SUCCESS]
        ok(ResponseCode.SUCCESS)
        late, late_transport = reply_for(2)
        late.prepare()
        late(ResponseCode.FLUSH_DISK_TIMEOUT)
        early, early_transport = reply_for(3)
        early(ResponseCode.SUCCESS)
        early.prepare()
        return built, [frames(t) for t in (ok_transport, late_transport, early_transport)]

    built, written = asyncio.run(scenario())
    success, late = ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT
    assert built == [success, success, late, success]
    assert [[(code, n) for code, _opaque, n in w] for w in written] == [
        [(success, "1")],
        [(late, "2")],
        [(success, "3")],
    ]
    assert all(opaque != 0 for w in written for _code, opaque, _n in w)


def test_a_prepared_reply_to_a_oneway_request_writes_nothing() -> None:
    async def scenario() -> list[bytes]:
        transport = RecordingTransport()
        connection = Connection(Dispatcher("test"))
        connection.connection_made(transport)  # type: ignore[arg-type]
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, oneway=True)
        reply = PreparedReply(connection, request, lambda code: request.respond(code))
        reply.prepare()
        reply(ResponseCode.SUCCESS)
        return transport.writes

    assert asyncio.run(scenario()) == []
