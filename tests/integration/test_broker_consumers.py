"""Consumer-facing behaviour of a real broker process: long polling, heartbeats, the consumer
list and its change notifications, queue locks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconsume.wire.codes import RequestCode, ResponseCode

from ..scratch import module_dir
from .processes import ServerProcess, start_server
from .retry_support import total
from .wire_client import BrokerClient, eventually, ok, records


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with module_dir(tmp_path_factory, "broker") as root:
        server = start_server(
            "broker", "--listen", "127.0.0.1:0", "--store-dir", str(root / "store"),
            "--http-listen", "127.0.0.1:0",
        )  # fmt: skip
        yield server
        assert server.stop() == 0, "".join(server.output)


SUSPEND_MS = 60_000
"""Held pulls wait this long unless a message wakes them: a test that passes did not wait."""


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def held_pull(
    client: BrokerClient, addr: str, topic: str, offset: int, suspend_ms: int, **kwargs: Any
) -> asyncio.Task[Any]:
    """Start a suspended pull and return once the broker holds it: requests on one connection
    are handled in order, so the answer to a request sent after the pull means the pull was
    processed (and, finding nothing, held)."""
    connection = await client.remoting.connection(addr)
    request = client.pull_request("g-poll", topic, 0, offset, suspend_ms=suspend_ms, **kwargs)
    task = asyncio.ensure_future(connection.invoke(request, suspend_ms / 1000 + 5))
    await asyncio.sleep(0)  # let the task write the pull before the barrier below
    await client.queue_offset(addr, RequestCode.GET_MAX_OFFSET, topic, 0)
    assert not task.done(), task.result().code
    return task


def test_a_held_pull_is_woken_by_each_send_to_its_queue(broker: ServerProcess) -> None:
    """Each send wakes the pull held on its queue: the broker counts the wake-up, and the
    pull answers with that message although its suspension has most of a minute to go. (How
    soon after the send is measured in ``bench/pull_wake.py``.)"""
    addr = broker.address

    async def scenario() -> list[float]:
        async with BrokerClient() as consumer, BrokerClient() as producer:
            ok(await producer.create_topic(addr, "polled", 1))
            ok(await producer.send(addr, "polled", b"warm-up"))
            ok(await consumer.pull(addr, "g-poll", "polled", 0, 0))
            woken = []
            for offset in (1, 2, 3):
                before = await total([broker], "reconsume_long_poll_woken_total")
                pull = await held_pull(consumer, addr, "polled", offset, SUSPEND_MS)
                ok(await producer.send(addr, "polled", b"m%d" % offset))
                response = await pull
                assert [m.queue_offset for m in records(ok(response))] == [offset]
                woken.append(await total([broker], "reconsume_long_poll_woken_total") - before)
            return woken

    assert run(scenario()) == [1, 1, 1]


def test_a_held_pull_on_an_empty_queue_wakes_on_the_first_message(broker: ServerProcess) -> None:
    addr = broker.address

    async def scenario() -> tuple[float, Any]:
        async with BrokerClient() as consumer, BrokerClient() as producer:
            ok(await producer.create_topic(addr, "fresh", 1))
            before = await total([broker], "reconsume_long_poll_woken_total")
            pull = await held_pull(consumer, addr, "fresh", 0, SUSPEND_MS)
            ok(await producer.send(addr, "fresh", b"first"))
            response = await pull
            return await total([broker], "reconsume_long_poll_woken_total") - before, response

    woken, response = run(scenario())
    assert [m.body for m in records(ok(response))] == [b"first"]
    assert woken == 1


def test_a_held_pull_times_out_not_found_and_ignores_other_tags(broker: ServerProcess) -> None:
    addr = broker.address

    async def woken() -> float:
        return await total([broker], "reconsume_long_poll_woken_total")

    async def scenario() -> list[tuple[float, float, Any]]:
        async with BrokerClient() as consumer, BrokerClient() as producer:
            ok(await producer.create_topic(addr, "quiet", 1))
            answers = []

            async def answer(pull: asyncio.Task[Any], started: float, before: float) -> None:
                response = await pull  # the request's own timeout: suspension + 5 s
                answers.append((time.monotonic() - started, await woken() - before, response))

            # Nothing arrives: PULL_NOT_FOUND once the suspend timeout has passed.
            before, started = await woken(), time.monotonic()
            pull = await held_pull(consumer, addr, "quiet", 0, 400)
            await answer(pull, started, before)
            # A message with another tag does not wake a pull filtering on "wanted"; at the
            # timeout it answers as RocketMQ does: retry right away from past that message.
            before, started = await woken(), time.monotonic()
            pull = await held_pull(consumer, addr, "quiet", 0, 400, subscription="wanted")
            ok(await producer.send(addr, "quiet", b"other", properties={"TAGS": "other"}))
            await answer(pull, started, before)
            before, started = await woken(), time.monotonic()
            pull = await held_pull(consumer, addr, "quiet", 1, SUSPEND_MS, subscription="wanted")
            ok(await producer.send(addr, "quiet", b"yes", properties={"TAGS": "wanted"}))
            await answer(pull, started, before)
            return answers

    (quiet_s, quiet_woken, quiet), (other_s, other_woken, other), (_, wanted_woken, wanted) = run(
        scenario()
    )
    assert quiet.code == ResponseCode.PULL_NOT_FOUND
    assert (quiet_s >= 0.4, quiet_woken) == (True, 0)  # never before its suspension ends
    assert other.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert other.ext_fields["nextBeginOffset"] == "1"
    assert (other_s >= 0.4, other_woken) == (True, 0)
    assert [m.body for m in records(ok(wanted))] == [b"yes"]
    assert wanted_woken == 1


def test_heartbeats_consumer_list_and_change_notifications(broker: ServerProcess) -> None:
    addr = broker.address

    async def scenario() -> dict[str, Any]:
        first, second = BrokerClient(), BrokerClient()
        try:
            ok(await first.heartbeat(addr, "c1", "g-members", {"members": "*"}))
            alone = await first.consumer_list(addr, "g-members")
            first.notified.clear()
            first.notifications.clear()
            ok(await second.heartbeat(addr, "c2", "g-members", {"members": "*"}))
            await asyncio.wait_for(first.notified.wait(), 5)
            both = await first.consumer_list(addr, "g-members")
            # A repeated heartbeat changes nothing and notifies nobody.
            first.notified.clear()
            ok(await second.heartbeat(addr, "c2", "g-members", {"members": "*"}))
            quiet = first.notified.is_set()
            await second.close()  # the connection closing removes c2 and notifies c1

            async def only_first() -> list[str] | None:
                members = await first.consumer_list(addr, "g-members")
                return members if members == ["c1"] else None

            after_close = await eventually(only_first, what="c2 removed")
            await asyncio.wait_for(first.notified.wait(), 5)
            ok(await first.unregister(addr, "c1", "g-members"))
            after_unregister = await first.consumer_list(addr, "g-members")
            topics = (await first.topics(addr))["topicConfigTable"]
            return {
                "alone": alone, "both": both, "quiet": quiet, "after_close": after_close,
                "after_unregister": after_unregister, "notified": first.notifications,
                "retry_topic": topics.get("%RETRY%g-members"),
            }  # fmt: skip
        finally:
            await first.close()
            await second.close()

    r = run(scenario())
    assert r["alone"] == ["c1"]
    assert r["both"] == ["c1", "c2"]
    assert r["quiet"] is False
    assert r["after_close"] == ["c1"]
    assert r["after_unregister"] is None
    assert set(r["notified"]) == {"g-members"}
    # A consumer's heartbeat creates its group's retry topic (retryQueueNums queues, RW).
    assert (r["retry_topic"]["readQueueNums"], r["retry_topic"]["perm"]) == (1, 6)


def test_lock_and_unlock_batch(broker: ServerProcess) -> None:
    addr = broker.address
    q = [("locked", "broker-a", i) for i in range(3)]

    async def scenario() -> list[Any]:
        async with BrokerClient() as client:
            return [
                await client.lock(addr, "g-lock", "c1", q[:2]),
                await client.lock(addr, "g-lock", "c2", q[1:]),
                await client.lock(addr, "g-lock", "c1", q[:2]),  # renewal
                await client.lock(addr, "g-lock", "c1", [q[1]], unlock=True),
                await client.lock(addr, "g-lock", "c2", q[1:]),
                await client.lock(addr, "other-group", "c3", q),
            ]

    first, second, renewed, _unlocked, after_unlock, other_group = run(scenario())
    assert first == q[:2]
    assert second == [q[2]]
    assert renewed == q[:2]
    assert after_unlock == q[1:]
    assert other_group == q


def test_queue_locks_expire_after_60_seconds() -> None:
    from reconsume.broker.locks import LockTable, QueueKey

    now = [0.0]
    table = LockTable(clock=lambda: now[0])
    queue = QueueKey("t", "b", 0)
    assert table.try_lock("g", [queue], "c1") == {queue}
    now[0] = 59.0
    assert table.try_lock("g", [queue], "c2") == set()
    assert table.holder("g", queue) == "c1"
    now[0] = 120.0
    assert table.holder("g", queue) is None
    assert table.try_lock("g", [queue], "c2") == {queue}


def test_query_offset_without_commit_follows_rocketmq_when_the_queue_is_old(
    tmp_path: Path,
) -> None:
    """No committed offset: 0 while the queue starts at 0 and its first message is recent,
    QUERY_NOT_FOUND once that message is further from the log's end than the page-cache
    budget (so the client falls back to consumeFromWhere)."""
    from reconsume.broker.offsets import first_message_in_memory
    from reconsume.store import MessageStore, PutRequest

    with MessageStore(tmp_path, background=False) as store:
        assert first_message_in_memory(store, "t", 0, memory=0)  # no queue at all
        store.put(PutRequest("t", 0, b"x" * 1000))
        store.put(PutRequest("t", 0, b"x" * 1000))
        assert first_message_in_memory(store, "t", 0, memory=1 << 20)
        assert not first_message_in_memory(store, "t", 0, memory=100)
