"""The registrar against a slow name server on loopback: a topic change is "registered" only
once a round that carries it has been answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from reconsume.broker import registration
from reconsume.broker.registration import Registrar
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingServer
from reconsume.wire.transport import Connection


class SlowNameServer:
    """Answers REGISTER_BROKER after ``delay_s``, recording each body's topic names."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.started: list[set[str]] = []
        self.answered: list[set[str]] = []
        self.first_started = asyncio.Event()
        self.first_answered = asyncio.Event()

    async def register(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        body = json.loads(request.body)
        topics = set(body["topicConfigSerializeWrapper"]["topicConfigTable"])
        self.started.append(topics)
        self.first_started.set()
        await asyncio.sleep(self.delay_s)
        self.answered.append(topics)
        self.first_answered.set()
        return request.respond()

    async def unregister(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        return request.respond()


@asynccontextmanager
async def registering(
    namesrv: SlowNameServer, topics: dict[str, Any]
) -> AsyncIterator[Callable[[], Registrar]]:
    dispatcher = Dispatcher("slow-namesrv")
    dispatcher.register(RequestCode.REGISTER_BROKER, namesrv.register)
    dispatcher.register(RequestCode.UNREGISTER_BROKER, namesrv.unregister)
    server = RemotingServer(dispatcher)
    port = await server.start("127.0.0.1", 0)
    registrar = Registrar(
        namesrv_addresses=(f"127.0.0.1:{port}",),
        broker_name="broker-a",
        broker_addr="127.0.0.1:10911",
        cluster_name="c",
        broker_id=0,
        interval_s=3600,
        topic_wrapper=lambda: {"topicConfigTable": dict(topics), "dataVersion": {}},
    )
    registrar.start()
    try:
        yield lambda: registrar
    finally:
        await registrar.close()
        await server.stop()


async def _until(event: asyncio.Event) -> None:
    async with asyncio.timeout(10):
        await event.wait()


def test_registered_returns_once_the_change_was_answered() -> None:
    async def scenario() -> None:
        namesrv = SlowNameServer(delay_s=0.3)
        topics: dict[str, Any] = {}
        async with registering(namesrv, topics) as registrar:
            await _until(namesrv.first_answered)
            topics["orders"] = {}
            registrar().topics_changed()
            await registrar().registered()
            assert namesrv.answered[-1] == {"orders"}

    asyncio.run(scenario())


def test_a_change_during_a_round_waits_for_the_next_round() -> None:
    async def scenario() -> None:
        namesrv = SlowNameServer(delay_s=0.3)
        topics: dict[str, Any] = {}
        async with registering(namesrv, topics) as registrar:
            await _until(namesrv.first_started)  # the first round is under way
            topics["orders"] = {}
            registrar().topics_changed()
            await registrar().registered()
            assert namesrv.answered == [set(), {"orders"}]

    asyncio.run(scenario())


def test_a_name_server_that_never_answers_does_not_hold_the_change_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registration, "REGISTERED_WAIT_S", 0.2)

    async def scenario() -> None:
        namesrv = SlowNameServer(delay_s=3600)
        topics: dict[str, Any] = {}
        async with registering(namesrv, topics) as registrar:
            topics["orders"] = {}
            registrar().topics_changed()
            await registrar().registered()  # returns although the round is still waiting
            assert namesrv.answered == []

    asyncio.run(scenario())


def test_without_name_servers_there_is_nothing_to_wait_for() -> None:
    async def scenario() -> None:
        registrar = Registrar(
            namesrv_addresses=(),
            broker_name="broker-a",
            broker_addr="127.0.0.1:10911",
            cluster_name="c",
            broker_id=0,
            interval_s=3600,
            topic_wrapper=lambda: {},
        )
        registrar.start()
        registrar.topics_changed()
        await registrar.registered()
        await registrar.close()

    asyncio.run(scenario())
