"""A master and its replica as real processes: the replica holds the master's log byte for byte
and its metadata; under Sync replication a send is answered only once the replica has stored
it, and with the replica gone it is answered SLAVE_NOT_AVAILABLE; the replica refuses writes of
its own; bad replication requests are refused and change nothing."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.broker_api import BrokerApi
from reconsume.client.listener import ConsumeFrom
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.errors import ResponseError
from reconsume.message.model import Message
from reconsume.store import MessageStore
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient

from ..polling import eventually, eventually_async
from ..unit.store._helpers import check_consistency
from .cluster import Collector, start_broker
from .processes import ServerProcess, start_server
from .retry_support import Samples, scrape_now

NAME = "replicated"


@pytest.fixture
def namesrv() -> Iterator[ServerProcess]:
    process = start_server("namesrv", "--listen", "127.0.0.1:0")
    yield process
    process.stop()


def start_master(namesrv: ServerProcess, store: Path, *extra: str) -> ServerProcess:
    """A Sync-replicated master serving its metrics (so a test can wait for its replicas)."""
    return start_broker(
        namesrv.address, NAME, store, extra=("--replication", "Sync", "--replica-lag-max-ms",
                                             "1000", "--http-listen", "127.0.0.1:0", *extra)
    )  # fmt: skip


def start_replica(namesrv: ServerProcess, store: Path, master: ServerProcess) -> ServerProcess:
    return start_broker(
        namesrv.address, NAME, store, extra=("--broker-id", "1", "--master", master.address)
    )


async def registered(namesrv: ServerProcess, addresses: dict[int, str]) -> None:
    async def probe() -> bool:
        async with AdminClient([namesrv.address]) as admin:
            return any(b.name == NAME and b.addresses == addresses for b in await admin.brokers())

    await eventually_async(probe, 20, f"{NAME} registered as {addresses}")


def in_sync(master: ServerProcess, replicas: int) -> None:
    """Wait until ``replicas`` replicas have caught up with ``master``: registered with the name
    server is not enough, as a replica registers before its handshake, and a Sync send before
    that is answered SLAVE_NOT_AVAILABLE."""
    key = ("reconsume_replication_in_sync_replicas", frozenset())
    eventually(
        lambda: scrape_now(master).get(key) == replicas,
        20,
        f"{replicas} replicas in sync with the master",
        detail=lambda: str(scrape_now(master)),
    )


async def send(namesrv: ServerProcess, count: int, tag: str) -> list[str]:
    async with Producer([namesrv.address], retries=0) as producer:
        return [
            (await producer.send(Message("orders", f"{tag}-{i}".encode()))).offset_msg_id
            for i in range(count)
        ]


def log_bytes(store: MessageStore) -> bytes:
    out, offset = bytearray(), store.commitlog.min_offset
    while offset < store.commitlog.write_offset:
        chunk = store.read_log(offset, 1 << 20)
        out += chunk
        offset += len(chunk)
    return bytes(out)


def test_a_replica_holds_the_masters_log_and_sync_sends_wait_for_it(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    master = start_master(namesrv, tmp_path / "master")
    replica = start_replica(namesrv, tmp_path / "replica", master)
    try:
        asyncio.run(registered(namesrv, {0: master.address, 1: replica.address}))
        in_sync(master, 1)
        sent = asyncio.run(send(namesrv, 200, "first"))
        assert len(set(sent)) == 200

        replica.kill()  # the only replica: a Sync send can no longer count as stored

        async def refused() -> str:
            async with Producer([namesrv.address], retries=0) as producer:
                with pytest.raises(ResponseError) as caught:
                    await producer.send(Message("orders", b"alone"))
                return str(caught.value)

        assert "(code 11)" in asyncio.run(refused())  # SLAVE_NOT_AVAILABLE
        replica = start_replica(namesrv, tmp_path / "replica", master)  # catches up, in sync

        async def accepted() -> bool:
            try:
                await send(namesrv, 1, "again")
            except ResponseError:
                return False
            return True

        asyncio.run(eventually_async(accepted, 20, "the restarted replica in sync"))
        asyncio.run(send(namesrv, 100, "second"))
    finally:
        replica.stop()
        master.stop()
    with (
        MessageStore(tmp_path / "master", background=False) as leader,
        MessageStore(tmp_path / "replica", background=False) as follower,
    ):
        assert follower.commitlog.write_offset == leader.commitlog.write_offset
        assert log_bytes(follower) == log_bytes(leader)
        assert check_consistency(follower) == check_consistency(leader)
        assert follower.topics.get("orders") == leader.topics.get("orders")
        assert [e.epoch for e in follower.epochs.entries] == [
            e.epoch for e in leader.epochs.entries
        ]


def test_a_replica_refuses_sends_and_bad_replication_requests_change_nothing(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    master = start_master(namesrv, tmp_path / "master", "--replication-accept-alone")
    replica = start_replica(namesrv, tmp_path / "replica", master)

    async def scenario() -> None:
        await registered(namesrv, {0: master.address, 1: replica.address})
        client = RemotingClient()
        try:
            send = RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2,
                {"a": "P", "b": "orders", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                 "g": "0", "h": "0", "i": "", "j": "0", "k": "false"},
                b"body",
            )  # fmt: skip
            answer = await client.invoke(replica.address, send)
            assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "replica" in (answer.remark or "")
            bad = [
                RemotingCommand.request(RequestCode.REPLICATE_LOG, {"offset": "x"}),
                RemotingCommand.request(RequestCode.REPLICA_HANDSHAKE, body=b"\xff garbage"),
                RemotingCommand.request(
                    RequestCode.REPLICA_HANDSHAKE,
                    body=json.dumps(
                        {
                            "replicaId": "liar",
                            "epochs": [[99, 0]],
                            "end": 0,
                            "segmentBytes": 67108864,
                        }
                    ).encode(),
                ),
                RemotingCommand.request(
                    RequestCode.REPLICATE_LOG,
                    {"replicaId": "x", "offset": str(1 << 40), "ackOffset": "0", "maxBytes": "9"},
                ),
            ]
            answers = [await client.invoke(master.address, request) for request in bad]
            assert [a.code for a in answers] == [ResponseCode.SYSTEM_ERROR] * len(bad)
            assert "header field offset is 'x'" in (answers[0].remark or "")
            assert "older than epoch 99" in (answers[2].remark or "")
            assert "are not within this log" in (answers[3].remark or "")
        finally:
            await client.close()
        assert len(await send_ok(namesrv)) == 20  # the master and its replica still serve

    async def send_ok(ns: ServerProcess) -> list[str]:
        return await send(ns, 20, "after")

    try:
        asyncio.run(scenario())
    finally:
        replica.stop()
        master.stop()


def test_consumers_read_from_the_replica_while_the_master_is_away(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    master = start_master(namesrv, tmp_path / "master")
    replica = start_replica(namesrv, tmp_path / "replica", master)
    try:
        asyncio.run(registered(namesrv, {0: master.address, 1: replica.address}))
        in_sync(master, 1)
        sent = asyncio.run(send(namesrv, 300, "acknowledged"))
        master.kill()
        asyncio.run(registered(namesrv, {1: replica.address}))

        async def consume() -> Collector:
            collector = Collector()
            settings = ConsumerSettings(
                consume_from=ConsumeFrom.FIRST_OFFSET, persist_interval_s=0.2
            )
            consumer = PushConsumer([namesrv.address], "readers", settings=settings)
            consumer.subscribe("orders")
            consumer.register_listener(collector)
            async with consumer:
                await eventually_async(
                    lambda: len(set(collector.received)) >= 300, 30, "300 messages consumed"
                )

                async def committed() -> bool:
                    async with AdminClient([namesrv.address]) as admin:
                        progress = await admin.consumer_progress("readers", "orders")
                    return sum(p.consumer_offset for p in progress) >= 300

                await eventually_async(committed, 20, "offsets committed to the replica")
            return collector

        collector = asyncio.run(consume())
        assert {m.body.decode() for m in collector.messages} == {
            f"acknowledged-{i}" for i in range(300)
        }
        assert {m.msg_id for m in collector.messages} == set(sent)  # same offsets, same ids
    finally:
        replica.stop()


def test_the_masters_metrics_show_a_stopped_replica_falling_behind_and_catching_up(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    master = start_master(
        namesrv,
        tmp_path / "master",
        "--replication-accept-alone",
        "--replicas",
        "2",
    )
    replica = start_replica(namesrv, tmp_path / "replica", master)
    labels = frozenset({("replica", f"{NAME}-1")})

    def reported(lag: int, **gauges: float) -> Samples | None:
        """The master's samples once they say the replica lacks ``lag`` messages and each
        unlabelled ``reconsume_<gauge>`` has the value given; None before."""
        samples = scrape_now(master)
        wanted: Samples = {("reconsume_replica_lag_messages", labels): lag}
        wanted |= {("reconsume_" + name, frozenset()): value for name, value in gauges.items()}
        return samples if all(samples.get(key) == value for key, value in wanted.items()) else None

    def caught_up(what: str) -> None:
        eventually(
            lambda: reported(0, replication_in_sync_replicas=1),
            20,
            what,
            detail=lambda: str(scrape_now(master)),
        )

    try:
        asyncio.run(registered(namesrv, {0: master.address, 1: replica.address}))
        asyncio.run(send(namesrv, 20, "before"))
        caught_up("the replica holding the first 20 messages")
        assert replica.stop() == 0
        # the master saw it go (a Sync send would wait for it otherwise), still reports it
        eventually(lambda: reported(0, replication_connected_replicas=0), 20, "replica gone")
        asyncio.run(send(namesrv, 30, "away"))  # accepted on the master alone
        away = eventually(
            lambda: reported(
                30,
                replication_in_sync_replicas=0,
                replication_connected_replicas=0,
                broker_replicas_declared=2,
            ),
            20,
            "the stopped replica reported 30 messages behind",
            detail=lambda: str(scrape_now(master)),
        )
        assert away[("reconsume_replica_in_sync", labels)] == 0
        assert away[("reconsume_replica_lag_bytes", labels)] > 0
        assert away[("reconsume_replica_lag_seconds", labels)] >= 0
        replica = start_replica(namesrv, tmp_path / "replica", master)
        caught_up("the restarted replica caught up and in sync")
    finally:
        replica.stop()
        master.stop()


def test_a_replica_rebuilt_from_an_empty_store_catches_up_under_load(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    """Its volume lost, a replica starts empty while producers keep sending: it copies the
    master's whole log and metadata, joins the in-sync set, and Sync sends never fail for
    it while a second replica stays in sync."""
    master = start_master(namesrv, tmp_path / "master")
    first = start_replica(namesrv, tmp_path / "first", master)
    second = start_broker(
        namesrv.address, NAME, tmp_path / "second",
        extra=("--broker-id", "2", "--master", master.address),
    )  # fmt: skip
    acked: list[str] = []
    try:
        addresses = {0: master.address, 1: first.address, 2: second.address}
        asyncio.run(registered(namesrv, addresses))
        in_sync(master, 2)
        acked += asyncio.run(send(namesrv, 3000, "before"))

        async def under_load() -> None:
            stop = asyncio.Event()

            async def produce() -> None:
                async with Producer([namesrv.address], retries=0) as producer:
                    index = 0
                    while not stop.is_set():
                        result = await producer.send(Message("orders", f"load-{index}".encode()))
                        acked.append(result.offset_msg_id)
                        index += 1

            task = asyncio.create_task(produce())
            nonlocal first
            first.kill()
            shutil.rmtree(tmp_path / "first")  # the replica's volume is lost
            first = start_replica(namesrv, tmp_path / "first", master)
            await registered(namesrv, {0: master.address, 1: first.address, 2: second.address})

            async def caught_up() -> bool:
                async with AdminClient([namesrv.address]) as admin:
                    route = await admin.route("orders")
                assert route is not None
                client = RemotingClient()
                try:
                    api = BrokerApi(client)
                    ends = [
                        [await api.max_offset(address, queue) for queue in route.read_queues]
                        for address in (master.address, first.address)
                    ]
                finally:
                    await client.close()
                return len(acked) > 3100 and ends[0] == ends[1]

            await eventually_async(caught_up, 60, "the rebuilt replica caught up")
            stop.set()
            await task  # no send failed while it was away or catching up

        asyncio.run(under_load())
    finally:
        for process in (first, second, master):
            process.stop()
    with (
        MessageStore(tmp_path / "master", background=False) as leader,
        MessageStore(tmp_path / "first", background=False) as rebuilt,
    ):
        assert log_bytes(rebuilt) == log_bytes(leader)
        assert check_consistency(rebuilt) == check_consistency(leader)
        assert rebuilt.topics.get("orders") == leader.topics.get("orders")
    assert len(set(acked)) == len(acked) > 3100
