"""A replica's exchange with its master over a real loopback connection, against a master of
the test's own: what it sends applied, indexed and acknowledged by the next request; a master
that then goes silent ends the exchange with a timeout from the exchange's one watchdog; an
answer that does not continue the log ends it with a ReplicationError, the log unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from reconsume.broker import replica_exchange
from reconsume.broker.follower import Follower
from reconsume.errors import RemotingTimeoutError, ReplicationError
from reconsume.store import MessageStore, StoreSettings
from reconsume.store.requests import PutRequest
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.transport import Connection

SETTINGS = StoreSettings(
    commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
)

Answer = Callable[[RemotingCommand, MessageStore], RemotingCommand | None]


@asynccontextmanager
async def master(root: Path, answer: Answer) -> AsyncIterator[tuple[str, list[int]]]:
    """A master holding three records; its REPLICATE_LOG answers are ``answer``'s (None: never
    answered). Yields its address and the ackOffsets it was sent."""
    acks: list[int] = []
    with MessageStore(root, SETTINGS, background=False) as store:
        for n in range(3):
            store.append(PutRequest(topic="T", queue_id=0, body=b"m%d" % n, properties=""))

        def handshake(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
            document = {"epoch": 1, "epochs": [[1, 0]], "minOffset": 0, "maxOffset": 0}
            document["agreed"] = 0
            return request.respond(body=json.dumps(document).encode())

        def replicate(request: RemotingCommand, _connection: Connection) -> RemotingCommand | None:
            acks.append(int(request.ext_fields["ackOffset"]))
            return answer(request, store)

        def metadata(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
            return request.respond(body=b"{}")  # never asked here: no metadataVersion sent

        dispatcher = Dispatcher("master")
        dispatcher.register(RequestCode.REPLICA_HANDSHAKE, handshake)
        dispatcher.register(RequestCode.REPLICATE_LOG, replicate)
        dispatcher.register(RequestCode.REPLICA_METADATA, metadata)
        server = RemotingServer(dispatcher)
        port = await server.start("127.0.0.1", 0)
        try:
            yield f"127.0.0.1:{port}", acks
        finally:
            await server.stop()


def the_log(request: RemotingCommand, store: MessageStore) -> RemotingCommand | None:
    """Everything after the offset asked for; at the end, nothing (held forever)."""
    offset = int(request.ext_fields["offset"])
    data = store.read_log(offset, 1 << 20)
    if not data:
        return None
    ext = {"offset": str(offset), "maxOffset": str(store.commitlog.write_offset), "epoch": "1"}
    return request.respond(ext_fields=ext, body=data)


def follower_of(replica: MessageStore, address: str) -> Follower:
    return Follower(replica, lambda: address, "r1", client=RemotingClient(signer=None))


def test_a_silent_master_ends_the_exchange_by_the_watchdog_after_the_log_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_exchange, "REQUEST_TIMEOUT_S", 0.3)

    async def scenario() -> None:
        async with master(tmp_path / "master", the_log) as (address, acks):
            with MessageStore(tmp_path / "replica", SETTINGS, background=False) as replica:
                follower = follower_of(replica, address)
                with pytest.raises(RemotingTimeoutError, match=r"no response within 0\.3s"):
                    await follower._follow(address)
                end = replica.commitlog.write_offset
                assert end > 0
                assert replica.max_offset("T", 0) == 3  # indexed
                assert acks == [0, end]  # the second request acknowledged the three records
                await follower.close()

    asyncio.run(scenario())


def test_an_answer_that_does_not_continue_the_log_ends_the_exchange_and_changes_nothing(
    tmp_path: Path,
) -> None:
    def elsewhere(request: RemotingCommand, store: MessageStore) -> RemotingCommand:
        ext = {"offset": "100", "maxOffset": str(store.commitlog.write_offset), "epoch": "1"}
        return request.respond(ext_fields=ext, body=store.read_log(0, 1 << 20))

    async def scenario() -> None:
        async with master(tmp_path / "master", elsewhere) as (address, _acks):
            with MessageStore(tmp_path / "replica", SETTINGS, background=False) as replica:
                follower = follower_of(replica, address)
                with pytest.raises(ReplicationError, match="answered for offset 100"):
                    await follower._follow(address)
                assert replica.commitlog.write_offset == 0
                await follower.close()

    asyncio.run(scenario())
