"""Offsets acknowledged past a committed offset, on real brokers: what a dead-letter job
handled past the first dead letter it kept lowers the dead-letter depth the broker exports
and the operator reads, survives a restart, follows the master to its replica, and bad
acknowledgements are refused without changing anything."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.client.acked import Acked, ack_offsets, query_acked
from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.client.routes import MessageQueue
from reconsume.errors import ResponseError
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_job_group, dead_letter_topic
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient

from ..polling import eventually_async
from .cluster import start_broker
from .processes import ServerProcess, start_server
from .retry_support import scrape_now

NAME = "acking"
GROUP = "orders-service"
TOPIC = dead_letter_topic(GROUP)
JOBS = dead_letter_job_group(GROUP)
QUEUE = MessageQueue(TOPIC, NAME, 0)


@pytest.fixture
def namesrv() -> Iterator[ServerProcess]:
    process = start_server("namesrv", "--listen", "127.0.0.1:0")
    yield process
    process.stop()


def _master(namesrv: ServerProcess, store: Path) -> ServerProcess:
    return start_broker(
        namesrv.address, NAME, store,
        extra=("--http-listen", "127.0.0.1:0", "--replication", "Async"),
    )  # fmt: skip


async def _fill(namesrv: ServerProcess, address: str, count: int) -> None:
    async with AdminClient([namesrv.address]) as admin:

        async def registered() -> bool:
            return any(b.name == NAME and b.master == address for b in await admin.brokers())

        await eventually_async(registered, 20, f"{NAME} registered with the name server")
        await admin.create_group(SubscriptionGroupConfig(GROUP))
        await admin.create_topic(TOPIC, queues=1)
    async with Producer([namesrv.address]) as producer:
        for i in range(count):
            await producer.send_direct(address, Message(TOPIC, f"dead-{i}".encode()), QUEUE)


def _depth(broker: ServerProcess) -> float:
    return scrape_now(broker)[("reconsume_dead_letter_depth", frozenset({("group", GROUP)}))]


def test_acknowledged_dead_letters_leave_the_depth_and_follow_the_master(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    master = _master(namesrv, tmp_path / "master")
    replica = None

    async def scenario() -> None:
        nonlocal replica
        await _fill(namesrv, master.address, 20)
        client = RemotingClient()
        async with AdminClient([namesrv.address]) as admin:
            api = admin.broker_api
            assert await query_acked(api, master.address, JOBS, QUEUE) == Acked(0)
            assert _depth(master) == 20
            # A filtered job kept offsets 3 and 10 and handled everything else it read (0..15).
            answer = await ack_offsets(api, master.address, JOBS, QUEUE,
                                       [(0, 3), (4, 10), (11, 16)])  # fmt: skip
            assert answer == Acked(3, ((4, 10), (11, 16)))
            assert await admin.committed_offset_at(master.address, JOBS, QUEUE) == 3
            assert _depth(master) == 2 + 4  # 3 and 10 kept, 16..19 not read yet
            assert await admin.broker_depth(master.address, TOPIC, 1, group=JOBS) == 6
            # A later run handles the two kept ones: everything up to 16 is done.
            answer = await ack_offsets(api, master.address, JOBS, QUEUE, [(3, 4), (10, 11)])
            assert answer == Acked(16)
            assert _depth(master) == 4

            await ack_offsets(api, master.address, JOBS, QUEUE, [(18, 19)])
            replica = start_broker(
                namesrv.address, NAME, tmp_path / "replica",
                extra=("--broker-id", "1", "--master", master.address),
            )  # fmt: skip
            follower = replica.address

            async def followed() -> bool:
                acked = await query_acked(api, follower, JOBS, QUEUE)
                return acked == Acked(16, ((18, 19),))

            await eventually_async(followed, 20, "the replica holding the master's acks")
            refused = await client.invoke(
                follower,
                RemotingCommand.request(
                    RequestCode.ACK_QUEUE_OFFSETS,
                    {"consumerGroup": JOBS, "topic": TOPIC, "queueId": "0"},
                    b'{"ranges": [[16, 17]]}',
                ),
            )
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

            # Bad acknowledgements: refused, nothing changed, the broker serves on.
            for body in (b"garbage", b'{"ranges": [[5, 2]]}', b'{"ranges": [[16, 99]]}',
                         b'{"ranges": [[-1, 2]]}'):  # fmt: skip
                answer_ = await client.invoke(
                    master.address,
                    RemotingCommand.request(
                        RequestCode.ACK_QUEUE_OFFSETS,
                        {"consumerGroup": JOBS, "topic": TOPIC, "queueId": "0"},
                        body,
                    ),
                )
                assert answer_.code == ResponseCode.SYSTEM_ERROR, body
            with pytest.raises(ResponseError, match="ends at 20"):
                await ack_offsets(api, master.address, JOBS, QUEUE, [(19, 21)])
            assert await query_acked(api, master.address, JOBS, QUEUE) == Acked(16, ((18, 19),))
        await client.close()

    try:
        asyncio.run(scenario())
        master.stop()
        master = _master(namesrv, tmp_path / "master")

        async def after_restart() -> Acked | None:
            async with AdminClient([namesrv.address]) as admin:
                return await query_acked(admin.broker_api, master.address, JOBS, QUEUE)

        assert asyncio.run(after_restart()) == Acked(16, ((18, 19),))
        assert _depth(master) == 3
    finally:
        if replica is not None:
            replica.stop()
        master.stop()
