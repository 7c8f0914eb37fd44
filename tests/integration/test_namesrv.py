"""The name server as a real process, spoken to over loopback."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from reconsume.wire.codes import RequestCode, ResponseCode, SerializeType
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.frame import encode_frame
from reconsume.wire.headers import (
    EPOCH_FIELD,
    STABLE_ADDRESS_FIELD,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)

from .processes import MALFORMED_FRAMES, RECONSUME, ServerProcess, raw_exchange, start_server
from .wire_client import eventually


@pytest.fixture
def namesrv() -> Iterator[ServerProcess]:
    server = start_server("namesrv", "--listen", "127.0.0.1:0")
    yield server
    assert server.stop() == 0


def register_request(
    broker: str, addr: str, topics: dict[str, int], cluster: str = "c1", counter: int = 1
) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        broker_name=broker, broker_addr=addr, cluster_name=cluster, ha_server_addr="", broker_id=0
    )
    table = {
        name: {"topicName": name, "readQueueNums": n, "writeQueueNums": n, "perm": 6}
        for name, n in topics.items()
    }
    body = {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": table,
            "dataVersion": {"counter": counter, "timestamp": counter},
        },
        "filterServerList": [],
    }
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER, header.to_ext_fields(), json.dumps(body).encode()
    )


def route_request(topic: str, version: int = 409, standard: bool | None = None) -> RemotingCommand:
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        GetRouteInfoRequestHeader(topic, standard).to_ext_fields(),
    )
    request.version = version
    return request


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_registered_brokers_make_routes_in_standard_and_fastjson_form(
    namesrv: ServerProcess,
) -> None:
    async def scenario() -> tuple[RemotingCommand, RemotingCommand, RemotingCommand]:
        client = RemotingClient()
        try:
            for name, addr in (("broker-a", "127.0.0.1:20911"), ("broker-b", "127.0.0.1:20912")):
                response = await client.invoke(
                    namesrv.address, register_request(name, addr, {"orders": 4})
                )
                assert response.code == ResponseCode.SUCCESS, response.remark
            new = await client.invoke(namesrv.address, route_request("orders"))
            old = await client.invoke(namesrv.address, route_request("orders", version=399))
            asked = await client.invoke(namesrv.address, route_request("orders", 399, True))
            return new, old, asked
        finally:
            await client.close()

    new, old, asked = run(scenario())
    route = json.loads(new.body)
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert {q["writeQueueNums"] for q in route["queueDatas"]} == {4}
    assert route["brokerDatas"][0] == {
        "brokerAddrs": {"0": "127.0.0.1:20911"},
        "brokerName": "broker-a",
        "cluster": "c1",
    }
    assert b'"brokerAddrs":{0:"127.0.0.1:20911"}' in old.body  # what older clients parse
    assert json.loads(asked.body) == route


def test_unknown_topic_and_missing_kv_config_answer_their_codes(namesrv: ServerProcess) -> None:
    async def scenario() -> tuple[RemotingCommand, RemotingCommand]:
        client = RemotingClient()
        try:
            missing = await client.invoke(namesrv.address, route_request("nowhere"))
            kv = await client.invoke(
                namesrv.address,
                RemotingCommand.request(
                    RequestCode.GET_KV_CONFIG,
                    {"namespace": "ORDER_TOPIC_CONFIG", "key": "orders"},
                ),
            )
            return missing, kv
        finally:
            await client.close()

    missing, kv = run(scenario())
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert "nowhere" in (missing.remark or "")
    assert kv.code == ResponseCode.QUERY_NOT_FOUND


def test_cluster_info_topic_list_unregister_and_topic_table_replacement(
    namesrv: ServerProcess,
) -> None:
    async def scenario() -> dict[str, Any]:
        client = RemotingClient()
        addr = namesrv.address
        try:
            await client.invoke(addr, register_request("b1", "127.0.0.1:1", {"t1": 2, "t2": 2}))
            await client.invoke(addr, register_request("b2", "127.0.0.1:2", {"t1": 2}, "c2"))
            info = json.loads(
                (
                    await client.invoke(
                        addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
                    )
                ).body
            )
            topics = json.loads(
                (
                    await client.invoke(
                        addr,
                        RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
                    )
                ).body
            )
            # b1 re-registers without t2 (deleted on the broker): the route follows.
            await client.invoke(addr, register_request("b1", "127.0.0.1:1", {"t1": 2}, counter=2))
            t2_after = (await client.invoke(addr, route_request("t2"))).code
            header = UnregisterBrokerRequestHeader("b2", "127.0.0.1:2", "c2", 0)
            await client.invoke(
                addr,
                RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields()),
            )
            t1_route = json.loads((await client.invoke(addr, route_request("t1"))).body)
            return {"info": info, "topics": topics, "t2_after": t2_after, "t1": t1_route}
        finally:
            await client.close()

    result = run(scenario())
    assert result["info"]["clusterAddrTable"] == {"c1": ["b1"], "c2": ["b2"]}
    assert result["info"]["brokerAddrTable"]["b2"]["brokerAddrs"] == {"0": "127.0.0.1:2"}
    assert sorted(result["topics"]["topicList"]) == ["t1", "t2"]
    assert result["t2_after"] == ResponseCode.TOPIC_NOT_EXIST
    assert [q["brokerName"] for q in result["t1"]["queueDatas"]] == ["b1"]


def test_a_broker_that_disconnects_or_stops_registering_leaves_the_routes() -> None:
    server = start_server(
        "namesrv", "--listen", "127.0.0.1:0", "--broker-expiry-s", "1", "--scan-interval-s", "0.1"
    )
    try:

        async def scenario() -> None:
            registrar = RemotingClient()
            reader = RemotingClient()
            addr = server.address
            await registrar.invoke(addr, register_request("quiet", "127.0.0.1:3", {"q": 1}))
            await registrar.invoke(addr, register_request("gone", "127.0.0.1:4", {"g": 1}))
            assert (await reader.invoke(addr, route_request("q"))).code == ResponseCode.SUCCESS

            # Expiry: the registrar stays connected but never registers again.
            async def route_gone(topic: str) -> bool:
                response = await reader.invoke(addr, route_request(topic))
                return response.code == ResponseCode.TOPIC_NOT_EXIST

            await eventually(lambda: route_gone("q"), what="expiry of a silent broker")
            # Disconnect: a broker whose connection closes is removed at once.
            other = RemotingClient()
            await other.invoke(addr, register_request("gone", "127.0.0.1:4", {"g": 1}, counter=5))
            await other.close()
            await eventually(lambda: route_gone("g"), 5, "removal of a disconnected broker")
            await registrar.close()
            await reader.close()

        run(scenario())
    finally:
        assert server.stop() == 0


def test_a_stable_master_address_outlives_the_connection_that_registered_it(
    namesrv: ServerProcess,
) -> None:
    """A master registering its broker name's master Service keeps it in routes when its
    connection closes (it was SIGKILLed, say): the next master registers the same address,
    and clients that fetch the route meanwhile still find a master to write to. An old
    master's unregistration does not take it from a newer one."""

    async def scenario() -> None:
        addr, reader = namesrv.address, RemotingClient()
        stable = register_request("svc", "10.96.0.9:10911", {"s": 1})
        stable.ext_fields[STABLE_ADDRESS_FIELD] = "true"
        plain = register_request("pod", "10.244.0.5:10911", {"p": 1})
        master = RemotingClient()
        for request in (stable, plain):
            assert (await master.invoke(addr, request)).code == ResponseCode.SUCCESS
        await master.close()

        async def gone(topic: str) -> bool:
            response = await reader.invoke(addr, route_request(topic))
            return response.code == ResponseCode.TOPIC_NOT_EXIST

        await eventually(lambda: gone("p"), 5, "removal of the pod address")
        route = await reader.invoke(addr, route_request("s"))
        assert route.code == ResponseCode.SUCCESS
        (broker,) = json.loads(route.body)["brokerDatas"]
        assert broker["brokerAddrs"] == {"0": "10.96.0.9:10911"}

        # A master of epoch 3 stopping after the master of epoch 4 registered the same
        # address: its unregistration leaves the new master's alone; the new one's does not.
        for epoch in (3, 4):
            request = register_request("svc", "10.96.0.9:10911", {"s": 1}, counter=epoch)
            request.ext_fields |= {STABLE_ADDRESS_FIELD: "true", EPOCH_FIELD: str(epoch)}
            assert (await reader.invoke(addr, request)).code == ResponseCode.SUCCESS

        def unregister(epoch: int) -> RemotingCommand:
            header = UnregisterBrokerRequestHeader("svc", "10.96.0.9:10911", "c1", 0)
            ext = {**header.to_ext_fields(), EPOCH_FIELD: str(epoch)}
            return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext)

        assert (await reader.invoke(addr, unregister(3))).code == ResponseCode.SUCCESS
        assert not await gone("s")
        assert (await reader.invoke(addr, unregister(4))).code == ResponseCode.SUCCESS
        assert await gone("s")
        await reader.close()

    run(scenario())


@pytest.mark.parametrize("payload", MALFORMED_FRAMES.values(), ids=MALFORMED_FRAMES.keys())
def test_malformed_frames_close_one_connection_and_the_server_keeps_serving(
    namesrv: ServerProcess, payload: bytes
) -> None:
    answer = raw_exchange(namesrv.address, payload)
    assert answer == b""  # closed without a reply

    async def still_serving() -> int:
        client = RemotingClient()
        try:
            return (await client.invoke(namesrv.address, route_request("x"))).code
        finally:
            await client.close()

    assert run(still_serving()) == ResponseCode.TOPIC_NOT_EXIST
    assert namesrv.process.poll() is None


def test_unknown_codes_and_binary_headers_are_answered(namesrv: ServerProcess) -> None:
    async def scenario() -> tuple[RemotingCommand, RemotingCommand]:
        client = RemotingClient()
        try:
            unknown = await client.invoke(namesrv.address, RemotingCommand.request(9999))
            binary = route_request("nothing")
            binary.serialize_type = SerializeType.ROCKETMQ
            answered = await client.invoke(namesrv.address, binary)
            return unknown, answered
        finally:
            await client.close()

    unknown, answered = run(scenario())
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answered.code == ResponseCode.TOPIC_NOT_EXIST
    assert answered.serialize_type is SerializeType.ROCKETMQ
    assert encode_frame(answered)[4] == SerializeType.ROCKETMQ


def test_an_invalid_setting_fails_at_start_naming_it() -> None:
    result = subprocess.run(
        [RECONSUME, "namesrv", "--listen", "127.0.0.1:99999"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "port" in result.stderr
