"""Brokers as real processes, registered with a real name server: routes, send and pull,
offsets, tag filtering, lookups by id, admin round trips, topic auto-creation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconsume.message import parse_offset_msg_id
from reconsume.message.decode import decode_record
from reconsume.wire.codes import RequestCode, ResponseCode

from ..scratch import module_dir
from .processes import ServerProcess, start_server
from .wire_client import BrokerClient, eventually, ok, records

GROUP = "test-consumers"


@dataclass
class Cluster:
    namesrv: ServerProcess
    a: ServerProcess
    """Broker with topic auto-creation on."""
    b: ServerProcess
    """Broker with topic auto-creation off."""


def start_broker(namesrv: str, name: str, store: Path, *extra: str) -> ServerProcess:
    return start_server(
        "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv, "--store-dir", str(store),
        "--broker-name", name, "--cluster", "test-cluster", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    with module_dir(tmp_path_factory, "brokers") as root:
        a = start_broker(namesrv.address, "broker-a", root / "a")
        b = start_broker(namesrv.address, "broker-b", root / "b", "--no-auto-create-topic")
        yield Cluster(namesrv, a, b)
        assert a.stop() == 0, "".join(a.output)
        assert b.stop() == 0, "".join(b.output)
    assert namesrv.stop() == 0


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_topic_created_on_both_brokers_is_routed_to_both(cluster: Cluster) -> None:
    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            for broker in (cluster.a, cluster.b):
                ok(await client.create_topic(broker.address, "orders", 4))
            # As in RocketMQ, a broker answers a topic's creation once it has registered it:
            # the route is there at once.
            route: dict[str, Any] | None = await client.route(cluster.namesrv.address, "orders")
            assert route is not None
            return route

    route = run(scenario())
    assert sorted(
        (q["brokerName"], q["writeQueueNums"], q["readQueueNums"]) for q in route["queueDatas"]
    ) == [("broker-a", 4, 4), ("broker-b", 4, 4)]
    addresses = {d["brokerName"]: d["brokerAddrs"]["0"] for d in route["brokerDatas"]}
    assert addresses == {"broker-a": cluster.a.address, "broker-b": cluster.b.address}
    assert {d["cluster"] for d in route["brokerDatas"]} == {"test-cluster"}


def test_v1_v2_and_batch_sends_pull_back_exactly_what_was_sent(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> tuple[list[Any], Any, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "sends", 2))
            sent = [
                ok(await client.send(addr, "sends", b"v1", queue_id=1, v2=False,
                                     properties={"TAGS": "a", "KEYS": "k1"})),
                ok(await client.send(addr, "sends", b"v2", queue_id=1, properties={"TAGS": "b"})),
                ok(await client.send_batch(addr, "sends", [
                    (b"b0", {"UNIQ_KEY": "U0"}), (b"b1", {"UNIQ_KEY": "U1"}), (b"b2", {}),
                ], queue_id=1)),
            ]  # fmt: skip
            pulled = ok(await client.pull(addr, GROUP, "sends", 1, 0))
            empty = await client.pull(addr, GROUP, "sends", 0, 0)
            return sent, pulled, empty

    sent, pulled, empty = run(scenario())
    messages = records(pulled)
    assert [m.body for m in messages] == [b"v1", b"v2", b"b0", b"b1", b"b2"]
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4]
    assert {m.queue_id for m in messages} == {1}
    assert {m.topic for m in messages} == {"sends"}
    assert messages[0].tags == "a"
    assert messages[0].keys == ["k1"]
    assert messages[1].tags == "b"
    assert [m.uniq_key for m in messages[2:]] == ["U0", "U1", None]
    assert {m.flag for m in messages[2:]} == {7}
    for message in messages:
        assert message.properties["CLUSTER"] == "test-cluster"
        assert str(message.store_host) == addr
        assert str(message.born_host).startswith("127.0.0.1:")
    assert messages[2].properties["WAIT"] == "true"  # the batch's own properties
    # Response headers: offset message ids (comma-separated for a batch), queue, offset.
    ids = [r.ext_fields["msgId"] for r in sent]
    assert ids[0] == messages[0].msg_id
    assert ids[1] == messages[1].msg_id
    assert ids[2].split(",") == [m.msg_id for m in messages[2:]]
    assert [r.ext_fields["queueOffset"] for r in sent] == ["0", "1", "2"]
    assert {r.ext_fields["queueId"] for r in sent} == {"1"}
    assert pulled.ext_fields["nextBeginOffset"] == "5"
    assert (pulled.ext_fields["minOffset"], pulled.ext_fields["maxOffset"]) == ("0", "5")
    assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
    assert empty.code == ResponseCode.PULL_NOT_FOUND


def test_a_pull_takes_32_messages_and_a_bulk_pull_up_to_1024(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> tuple[Any, ...]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "bulk", 1))
            for start in range(0, 1100, 100):
                batch = [(f"m{i}".encode(), {}) for i in range(start, start + 100)]
                ok(await client.send_batch(addr, "bulk", batch))
            pulls = (
                await client.pull(addr, GROUP, "bulk", 0, 0, max_nums=1000),
                await client.pull(addr, GROUP, "bulk", 0, 0, max_nums=1000, bulk=True),
                await client.pull(addr, GROUP, "bulk", 0, 40, max_nums=2000, bulk=True),
                await client.pull(addr, GROUP, "bulk", 0, 1090, max_nums=200, bulk=True),
            )
            return tuple(ok(p) for p in pulls)

    consumer, bulk, capped, tail = run(scenario())
    assert [m.queue_offset for m in records(consumer)] == list(range(32))
    assert consumer.ext_fields["nextBeginOffset"] == "32"
    assert [m.body for m in records(bulk)] == [f"m{i}".encode() for i in range(1000)]
    assert [m.queue_offset for m in records(capped)] == list(range(40, 40 + 1024))
    assert capped.ext_fields["nextBeginOffset"] == str(40 + 1024)
    assert [m.queue_offset for m in records(tail)] == list(range(1090, 1100))


def test_offsets_commit_query_and_queue_offsets(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "offsets", 1))
            fresh = ok(await client.query_offset(addr, "g-off", "offsets", 0))
            before = int(time.time() * 1000)
            for i in range(3):
                ok(await client.send(addr, "offsets", b"m%d" % i))
            ok(await client.update_offset(addr, "g-off", "offsets", 0, 2))
            committed = ok(await client.query_offset(addr, "g-off", "offsets", 0))
            # The commit-offset flag of a pull stores commitOffset for the group.
            ok(await client.pull(addr, "g-pull", "offsets", 0, 0, commit_offset=3))
            by_pull = ok(await client.query_offset(addr, "g-pull", "offsets", 0))
            codes = RequestCode
            return {
                "fresh": fresh.ext_fields["offset"],
                "committed": committed.ext_fields["offset"],
                "by_pull": by_pull.ext_fields["offset"],
                "max": await client.queue_offset(addr, codes.GET_MAX_OFFSET, "offsets", 0),
                "min": await client.queue_offset(addr, codes.GET_MIN_OFFSET, "offsets", 0),
                "search_old": await client.queue_offset(
                    addr, codes.SEARCH_OFFSET_BY_TIMESTAMP, "offsets", 0, timestamp=before - 60_000
                ),
                "search_new": await client.queue_offset(
                    addr, codes.SEARCH_OFFSET_BY_TIMESTAMP, "offsets", 0, timestamp=before + 60_000
                ),
                "earliest": await client.queue_offset(
                    addr, codes.GET_EARLIEST_MSG_STORETIME, "offsets", 0
                ),
                "none_max": await client.queue_offset(addr, codes.GET_MAX_OFFSET, "nothing", 0),
                "none_earliest": await client.queue_offset(
                    addr, codes.GET_EARLIEST_MSG_STORETIME, "nothing", 0
                ),
                "before": before,
            }

    result = run(scenario())
    assert result["fresh"] == "0"  # nothing committed, queue starts at 0 and is in memory
    assert result["committed"] == "2"
    assert result["by_pull"] == "3"
    assert (result["min"], result["max"]) == (0, 3)
    assert (result["search_old"], result["search_new"]) == (0, 3)
    assert result["before"] - 1000 <= result["earliest"] <= time.time() * 1000
    assert (result["none_max"], result["none_earliest"]) == (0, -1)


def test_tag_filtering_by_request_and_by_heartbeat_subscription(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> tuple[list[bytes], list[bytes], list[bytes], int]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "tagged", 1))
            for tag in ("A", "B", "C", "A"):
                ok(await client.send(addr, "tagged", tag.encode(), properties={"TAGS": tag}))
            by_request = ok(await client.pull(addr, "g-tags", "tagged", 0, 0,
                                              subscription="A || C"))  # fmt: skip
            everything = ok(await client.pull(addr, "g-tags", "tagged", 0, 0, subscription="*"))
            # Without the subscription flag the broker uses what the heartbeat registered.
            unknown = await client.pull(addr, "g-hb", "tagged", 0, 0, subscription=None)
            ok(await client.heartbeat(addr, "client-1", "g-hb", {"tagged": "B"}))
            by_heartbeat = ok(await client.pull(addr, "g-hb", "tagged", 0, 0, subscription=None))
            return (
                [m.body for m in records(by_request)],
                [m.body for m in records(everything)],
                [m.body for m in records(by_heartbeat)],
                unknown.code,
            )

    by_request, everything, by_heartbeat, unknown = run(scenario())
    assert by_request == [b"A", b"C", b"A"]
    assert everything == [b"A", b"B", b"C", b"A"]
    assert by_heartbeat == [b"B"]
    assert unknown == ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_view_message_by_id_returns_the_stored_record(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> tuple[str, Any, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "viewed", 1))
            sent = ok(await client.send(addr, "viewed", b"look me up", properties={"KEYS": "x"}))
            msg_id = sent.ext_fields["msgId"]
            _host, offset = parse_offset_msg_id(msg_id)
            found = ok(await client.view(addr, offset))
            missing = await client.view(addr, offset + 1)
            return msg_id, found, missing

    msg_id, found, missing = run(scenario())
    message = decode_record(found.body, verify_crc=True)
    assert message.body == b"look me up"
    assert message.msg_id == msg_id
    assert message.keys == ["x"]
    assert missing.code == ResponseCode.SYSTEM_ERROR


def test_topic_and_group_admin_round_trips(cluster: Cluster) -> None:
    addr = cluster.b.address

    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "admin-t", 3, perm=4))
            created = (await client.topics(addr))["topicConfigTable"]["admin-t"]
            ok(await client.update_offset(addr, "g-admin", "admin-t", 0, 5))
            route = await eventually(lambda: client.route(cluster.namesrv.address, "admin-t"))
            refused_system = await client.create_topic(addr, "SCHEDULE_TOPIC_XXXX", 1)
            refused_name = await client.create_topic(addr, "bad topic", 1)
            ok(await client.delete_topic(addr, "admin-t"))
            after = await client.topics(addr)

            async def route_gone() -> bool:
                return await client.route(cluster.namesrv.address, "admin-t") is None

            await eventually(route_gone, what="route removal")
            offset_after = await client.query_offset(addr, "g-admin", "admin-t", 0)

            ok(await client.create_group(addr, {"groupName": "g-admin", "retryMaxTimes": 3,
                                                "retryQueueNums": 2}))  # fmt: skip
            groups = (await client.groups(addr))["subscriptionGroupTable"]
            ok(await client.delete_group(addr, "g-admin", remove_offset=True))
            groups_after = (await client.groups(addr))["subscriptionGroupTable"]
            bad_body = await client.invoke(
                addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b"{not json"
            )
            return {
                "created": created, "route": route, "system": refused_system,
                "name": refused_name, "after": after, "offset_after": offset_after,
                "groups": groups, "groups_after": groups_after, "bad_body": bad_body,
            }  # fmt: skip

    r = run(scenario())
    assert (r["created"]["readQueueNums"], r["created"]["perm"]) == (3, 4)
    assert r["route"]["queueDatas"][0]["perm"] == 4
    assert r["system"].code == ResponseCode.SYSTEM_ERROR
    assert r["name"].code == ResponseCode.SYSTEM_ERROR
    assert "admin-t" not in r["after"]["topicConfigTable"]
    assert r["after"]["dataVersion"]["counter"] > 0
    # The deleted topic's offsets went with it: nothing committed, empty queue → 0.
    assert r["offset_after"].ext_fields["offset"] == "0"
    assert (r["groups"]["g-admin"]["retryMaxTimes"], r["groups"]["g-admin"]["retryQueueNums"]) == (
        3,
        2,
    )
    assert "g-admin" not in r["groups_after"]
    assert r["bad_body"].code == ResponseCode.SYSTEM_ERROR


def test_auto_create_on_and_off_and_unknown_topics(cluster: Cluster) -> None:
    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            created = await client.send(cluster.a.address, "auto-made", b"x", queue_id=-1,
                                        default_queues=3)  # fmt: skip
            topics_a = (await client.topics(cluster.a.address))["topicConfigTable"]
            refused = await client.send(cluster.b.address, "not-made", b"x")
            topics_b = (await client.topics(cluster.b.address))["topicConfigTable"]
            route = await eventually(lambda: client.route(cluster.namesrv.address, "auto-made"))
            template = await client.route(cluster.namesrv.address, "TBW102")
            pull_unknown = await client.pull(cluster.b.address, GROUP, "not-made", 0, 0)
            return {
                "created": created, "topics_a": topics_a, "refused": refused,
                "topics_b": topics_b, "route": route, "template": template,
                "pull_unknown": pull_unknown,
            }  # fmt: skip

    r = run(scenario())
    assert r["created"].code == ResponseCode.SUCCESS
    assert 0 <= int(r["created"].ext_fields["queueId"]) < 3
    assert r["topics_a"]["auto-made"]["writeQueueNums"] == 3
    assert r["topics_a"]["auto-made"]["perm"] == 6
    assert r["refused"].code == ResponseCode.TOPIC_NOT_EXIST
    assert "not-made" in (r["refused"].remark or "")
    assert "TBW102" in r["topics_a"]
    assert "TBW102" not in r["topics_b"]
    assert [q["brokerName"] for q in r["route"]["queueDatas"]] == ["broker-a"]
    assert [q["brokerName"] for q in r["template"]["queueDatas"]] == ["broker-a"]
    assert r["pull_unknown"].code == ResponseCode.TOPIC_NOT_EXIST


def test_illegal_sends_and_pulls_are_refused_with_rocketmq_codes(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> dict[str, Any]:
        async with BrokerClient() as client:
            ok(await client.create_topic(addr, "strict", 2))
            ok(await client.send(addr, "strict", b"one"))
            return {
                "name": await client.send(addr, "bad/name", b"x"),
                "too_big": await client.send(addr, "strict", b"x" * (4 * 1024 * 1024 + 1)),
                "queue": await client.send(addr, "strict", b"x", queue_id=2),
                "schedule": await client.send(addr, "SCHEDULE_TOPIC_XXXX", b"x"),
                "batch": await client.send_batch(
                    addr, "strict", [], raw_body=b"\x00\x00\x00\x30xx"
                ),
                "no_header": await client.invoke(addr, RequestCode.SEND_MESSAGE_V2, {"b": "t"}),
                "moved": await client.pull(addr, GROUP, "strict", 0, 7),
                "bad_queue": await client.pull(addr, GROUP, "strict", 5, 0),
                "still_ok": await client.send(addr, "strict", b"two"),
            }

    r = run(scenario())
    assert r["name"].code == ResponseCode.MESSAGE_ILLEGAL
    assert "topic name" in (r["name"].remark or "")
    assert r["too_big"].code == ResponseCode.MESSAGE_ILLEGAL
    assert "limit" in (r["too_big"].remark or "")
    assert r["queue"].code == ResponseCode.SYSTEM_ERROR
    assert "queueId[2] is illegal" in (r["queue"].remark or "")
    assert r["schedule"].code == ResponseCode.NO_PERMISSION
    assert r["batch"].code == ResponseCode.MESSAGE_ILLEGAL
    assert r["no_header"].code == ResponseCode.SYSTEM_ERROR
    assert "required" in (r["no_header"].remark or "")
    assert r["moved"].code == ResponseCode.PULL_OFFSET_MOVED
    # RocketMQ's correction for an offset past the end: the min offset when it is 0.
    assert r["moved"].ext_fields["nextBeginOffset"] == "0"
    assert r["bad_queue"].code == ResponseCode.SYSTEM_ERROR
    assert r["still_ok"].code == ResponseCode.SUCCESS
    assert r["still_ok"].ext_fields["queueOffset"] == "1"


def test_retry_topic_sends_past_the_maximum_become_dead_letters(cluster: Cluster) -> None:
    addr = cluster.a.address

    async def scenario() -> tuple[Any, Any, list[Any]]:
        async with BrokerClient() as client:
            ok(await client.create_group(addr, {"groupName": "g-dlq", "retryMaxTimes": 2}))
            retry = ok(await client.send(addr, "%RETRY%g-dlq", b"again", queue_id=-1,
                                         reconsume_times=1))  # fmt: skip
            dead = ok(await client.send(addr, "%RETRY%g-dlq", b"dead", queue_id=-1,
                                        reconsume_times=2))  # fmt: skip
            pulled = ok(await client.pull(addr, "g-dlq-reader", "%DLQ%g-dlq", 0, 0))
            return retry, dead, records(pulled)

    retry, dead, dead_letters = run(scenario())
    assert retry.code == ResponseCode.SUCCESS
    assert [m.body for m in dead_letters] == [b"dead"]
    assert dead_letters[0].reconsume_times == 2
    assert dead.ext_fields["msgId"] == dead_letters[0].msg_id
