"""CONSUMER_SEND_MSG_BACK and delayed sends at the protocol level, against one real broker
started with --no-auto-create-group and five millisecond delay levels."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconsume.message import parse_offset_msg_id
from reconsume.message import properties as props
from reconsume.message.decode import decode_record
from reconsume.message.model import StoredMessage
from reconsume.message.names import SCHEDULE_TOPIC, dead_letter_topic, retry_topic
from reconsume.wire.codes import ResponseCode

from ..scratch import module_dir
from .cluster import Cluster
from .processes import ServerProcess
from .retry_support import TIMESTAMP_SLACK_S, metric, read_queue, retry_cluster, scrape
from .wire_client import BrokerClient, eventually, ok

DELAYS = "100ms 200ms 300ms 400ms 500ms"
DELAYS_MS = (100, 200, 300, 400, 500)
READER = "test-reader"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with (
        module_dir(tmp_path_factory, "retry-broker") as root,
        retry_cluster(
            root, ("broker-a",), delay_levels=DELAYS, extra=["--no-auto-create-group"]
        ) as cluster,
    ):
        asyncio.run(_create_group(cluster, READER))
        yield cluster.brokers["broker-a"]


async def _create_group(cluster: Cluster, group: str, **config: Any) -> None:
    async with BrokerClient() as client:
        for broker in cluster.brokers.values():
            ok(await client.create_group(broker.address, {"groupName": group, **config}))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def stored_offset(
    client: BrokerClient, addr: str, topic: str, body: bytes, **kwargs: Any
) -> int:
    """Send one message; its commit-log offset."""
    response = ok(await client.send(addr, topic, body, **kwargs))
    return parse_offset_msg_id(response.ext_fields["msgId"])[1]


async def arrived(
    client: BrokerClient, addr: str, topic: str, count: int, queue_id: int = 0
) -> list[StoredMessage]:
    async def probe() -> list[StoredMessage] | None:
        found = await read_queue(client, addr, topic, queue_id, READER)
        return found if len(found) >= count else None

    result: list[StoredMessage] = await eventually(probe, what=f"{count} in {topic}")
    return result


async def schedule_record(client: BrokerClient, addr: str, delivered: StoredMessage) -> Any:
    """The schedule-topic record a delivered message came from."""
    response = ok(await client.view(addr, int(delivered.properties[props.SCHEDULE_ORIGIN])))
    return decode_record(response.body)


def test_send_back_checks_come_in_order(broker: ServerProcess) -> None:
    addr = broker.address
    missing = 10**12

    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            r: dict[str, Any] = {}
            r["unknown"] = await client.send_back(addr, "g-unknown", missing)
            ok(await client.create_group(addr, {"groupName": "g-drop", "retryQueueNums": 0}))
            # Dropped before the message is looked up: a bad offset does not matter.
            r["dropped"] = await client.send_back(addr, "g-drop", missing)
            ok(await client.create_group(addr, {"groupName": "g-ro"}))
            ok(await client.create_topic(addr, retry_topic("g-ro"), 1, perm=4))
            r["read_only"] = await client.send_back(addr, "g-ro", missing)
            ok(await client.create_group(addr, {"groupName": "g-lookup"}))
            r["lookup"] = await client.send_back(addr, "g-lookup", missing)
            r["topics"] = (await client.topics(addr))["topicConfigTable"]
            r["metrics"] = await scrape(broker)
            return r

    r = run(scenario())
    assert r["unknown"].code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "g-unknown" in r["unknown"].remark
    assert r["dropped"].code == ResponseCode.SUCCESS
    assert retry_topic("g-drop") not in r["topics"]
    assert metric(r["metrics"], "reconsume_retry_dropped_total", group="g-drop") == 1
    assert r["read_only"].code == ResponseCode.NO_PERMISSION
    assert r["lookup"].code == ResponseCode.SYSTEM_ERROR
    assert "look message by offset failed" in r["lookup"].remark
    # The lookup came after the retry topic was made: retryQueueNums queues, RW.
    made = r["topics"][retry_topic("g-lookup")]
    assert (made["readQueueNums"], made["writeQueueNums"], made["perm"]) == (1, 1, 6)


def test_a_retry_waits_in_its_level_then_reaches_the_retry_topic(broker: ServerProcess) -> None:
    addr = broker.address
    group = "g-retry"

    async def scenario() -> tuple[int, StoredMessage, Any, Any]:
        async with BrokerClient() as client:
            ok(await client.create_group(addr, {"groupName": group}))
            ok(await client.create_topic(addr, "orders", 1))
            props_in = {props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "uniq-1", props.TAGS: "paid"}
            offset = await stored_offset(client, addr, "orders", b"body", properties=props_in)
            ok(await client.send_back(addr, group, offset, max_reconsume_times=5))
            [copy] = await arrived(client, addr, retry_topic(group), 1)
            return offset, copy, await schedule_record(client, addr, copy), await scrape(broker)

    offset, copy, scheduled, samples = run(scenario())
    assert copy.body == b"body"
    assert copy.reconsume_times == 1
    assert copy.tags == "paid"
    p = copy.properties
    assert p[props.RETRY_TOPIC] == "orders"
    assert parse_offset_msg_id(p[props.ORIGIN_MESSAGE_ID])[1] == offset
    assert p[props.REAL_TOPIC] == retry_topic(group)
    assert p[props.REAL_QUEUE_ID] == "0"
    assert props.DELAY_TIME_LEVEL not in p
    assert p[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "uniq-1"
    # Level 3 (3 + reconsumeTimes 0): schedule queue 2, delivered 300 ms after it was stored.
    assert (scheduled.topic, scheduled.queue_id) == (SCHEDULE_TOPIC, 2)
    assert scheduled.properties[props.DELAY_TIME_LEVEL] == "3"
    assert copy.store_timestamp_ms - scheduled.store_timestamp_ms >= DELAYS_MS[2]
    assert metric(samples, "reconsume_send_back_total", group=group, origin_topic="orders") == 1
    assert metric(samples, "reconsume_retry_depth", group=group) == 1


def test_header_maximum_levels_and_dead_letters(broker: ServerProcess) -> None:
    addr = broker.address
    group = "g-levels"

    async def scenario() -> tuple[list[Any], list[StoredMessage], Any]:
        async with BrokerClient() as client:
            ok(await client.create_group(addr, {"groupName": group, "retryMaxTimes": 16}))
            ok(await client.create_group(addr, {"groupName": "g-max1", "retryMaxTimes": 1}))
            ok(await client.create_topic(addr, "levels", 1))
            tired = await stored_offset(client, addr, "levels", b"r4", reconsume_times=4)
            once = await stored_offset(client, addr, "levels", b"r1", reconsume_times=1)
            # 3 + 4 = 7 is past the last level (5): clamped. An explicit 99 as well.
            ok(await client.send_back(addr, group, tired))
            ok(await client.send_back(addr, group, tired, delay_level=99))
            ok(await client.send_back(addr, group, tired, delay_level=2))
            retries = await arrived(client, addr, retry_topic(group), 3)
            scheduled = [await schedule_record(client, addr, m) for m in retries]
            # The header's maximum overrides the group's; the group's applies without one.
            ok(await client.send_back(addr, group, tired, max_reconsume_times=4))
            ok(await client.send_back(addr, "g-max1", once))
            ok(await client.send_back(addr, group, once, delay_level=-1))
            dead = await arrived(client, addr, dead_letter_topic(group), 2)
            dead += await arrived(client, addr, dead_letter_topic("g-max1"), 1)
            return scheduled, dead, await scrape(broker)

    scheduled, dead, samples = run(scenario())
    levels = sorted(int(s.properties[props.DELAY_TIME_LEVEL]) for s in scheduled)
    assert levels == [2, 5, 5]
    assert sorted(s.queue_id for s in scheduled) == [1, 4, 4]
    reasons = sorted(
        (m.topic, m.body, m.reconsume_times, m.properties[props.DLQ_REASON]) for m in dead
    )
    assert reasons == [
        (dead_letter_topic("g-levels"), b"r1", 2, "CONSUMER_REQUESTED"),
        (dead_letter_topic("g-levels"), b"r4", 5, "MAX_RECONSUME_TIMES"),
        (dead_letter_topic("g-max1"), b"r1", 2, "MAX_RECONSUME_TIMES"),
    ]
    for m in dead:
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == "levels"
        assert m.properties[props.DELAY_TIME_LEVEL] == "0"
    assert metric(samples, "reconsume_dead_letters_total", group=group, origin_topic="levels") == 2
    assert metric(samples, "reconsume_dead_letter_depth", group="g-max1") == 1
    assert metric(samples, "reconsume_send_back_total", group=group, origin_topic="levels") == 5


def test_producer_delay_levels_are_stored_in_the_schedule_and_delivered_when_due(
    broker: ServerProcess,
) -> None:
    addr = broker.address

    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "later", 2))
            r: dict[str, Any] = {}
            sent_at = time.time()
            r["level2"] = ok(
                await client.send(addr, "later", b"two", queue_id=1, properties={"DELAY": "2"})
            )
            r["level99"] = ok(
                await client.send(addr, "later", b"max", queue_id=1, properties={"DELAY": "99"})
            )
            r["garbage"] = ok(
                await client.send(addr, "later", b"now", queue_id=0, properties={"DELAY": "x"})
            )
            r["zero"] = ok(
                await client.send(addr, "later", b"now0", queue_id=0, properties={"DELAY": "0"})
            )
            r["immediate"] = await read_queue(client, addr, "later", 0, READER)
            r["delayed"] = await arrived(client, addr, "later", 2, queue_id=1)
            r["elapsed_s"] = time.time() - sent_at
            r["scheduled"] = [await schedule_record(client, addr, m) for m in r["delayed"]]
            return r

    r = run(scenario())
    assert r["level2"].ext_fields["queueId"] == "1"  # the answer names the real queue
    assert [m.body for m in r["immediate"]] == [b"now", b"now0"]
    # Only the scheduled copies reach queue 1 (no original), each stored no earlier than its
    # level's delay after its schedule record (below): no bound on how fast this test reads.
    assert [m.body for m in r["delayed"]] == [b"two", b"max"]
    assert r["elapsed_s"] >= DELAYS_MS[-1] / 1000 - TIMESTAMP_SLACK_S
    levels = [s.properties[props.DELAY_TIME_LEVEL] for s in r["scheduled"]]
    assert levels == ["2", "5"]  # 99 is clamped to the last level
    for copy, scheduled in zip(r["delayed"], r["scheduled"], strict=True):
        level = int(scheduled.properties[props.DELAY_TIME_LEVEL])
        assert copy.store_timestamp_ms - scheduled.store_timestamp_ms >= DELAYS_MS[level - 1]
        assert (copy.topic, copy.queue_id, copy.reconsume_times) == ("later", 1, 0)


def test_a_fallback_send_to_the_retry_topic_is_delayed_or_dead_lettered(
    broker: ServerProcess,
) -> None:
    addr = broker.address
    group = "g-fallback"

    async def scenario() -> tuple[list[StoredMessage], list[StoredMessage], Any]:
        async with BrokerClient() as client:
            ok(await client.create_group(addr, {"groupName": group, "retryMaxTimes": 3}))
            retry = retry_topic(group)
            fallback = {
                props.RETRY_TOPIC: "shop",
                props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "u-1",
                props.DELAY_TIME_LEVEL: "4",
            }
            ok(await client.send(addr, retry, b"again", queue_id=0, properties=fallback,
                                 reconsume_times=1))  # fmt: skip
            ok(await client.send(addr, retry, b"enough", queue_id=0, properties=fallback,
                                 reconsume_times=3))  # fmt: skip
            dead = await arrived(client, addr, dead_letter_topic(group), 1)
            retried = await arrived(client, addr, retry, 1)
            return retried, dead, await scrape(broker)

    retried, dead, samples = run(scenario())
    assert [(m.body, m.reconsume_times) for m in retried] == [(b"again", 1)]
    assert retried[0].properties[props.REAL_TOPIC] == retry_topic(group)
    [letter] = dead
    assert (letter.body, letter.reconsume_times) == (b"enough", 3)
    assert letter.properties[props.DLQ_ORIGIN_TOPIC] == "shop"
    assert letter.properties[props.DLQ_ORIGIN_MESSAGE_ID] == "u-1"
    assert letter.properties[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
    assert letter.properties[props.DELAY_TIME_LEVEL] == "0"
    assert metric(samples, "reconsume_dead_letters_total", group=group, origin_topic="shop") == 1
