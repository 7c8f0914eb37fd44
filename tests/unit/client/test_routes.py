"""Route parsing in both of the name server's JSON forms, and queue choice."""

from __future__ import annotations

import json

import pytest

from reconsume.client.routes import MessageQueue, TopicRoute, select_queue
from reconsume.errors import CodecError, InvalidArgumentError
from reconsume.wire import fastjson

ROUTE = {
    "brokerDatas": [
        {
            "brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"},
            "brokerName": "a",
            "cluster": "c",
        },
        {"brokerAddrs": {1: "10.0.0.3:10911"}, "brokerName": "b", "cluster": "c"},
        {"brokerAddrs": {0: "10.0.0.4:10911"}, "brokerName": "r", "cluster": "c"},
    ],
    "filterServerTable": {},
    "queueDatas": [
        {"brokerName": "r", "perm": 4, "readQueueNums": 1, "writeQueueNums": 1, "topicSysFlag": 0},
        {"brokerName": "a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 3, "topicSysFlag": 0},
        {"brokerName": "b", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1, "topicSysFlag": 0},
    ],
}


@pytest.mark.parametrize("standard", [True, False], ids=["standard", "fastjson"])
def test_routes_parse_in_both_forms(standard: bool) -> None:
    body = fastjson.dumps(ROUTE, standard=standard).encode()
    route = TopicRoute.parse("t", body)
    assert route.brokers["a"].addresses == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.master_of("a") == "10.0.0.1:10911"
    assert route.master_of("b") is None
    # writable queues need a master and the write permission; read-only broker r is read
    assert route.write_queues == tuple(MessageQueue("t", "a", i) for i in range(3))
    assert route.read_queues == (
        MessageQueue("t", "a", 0),
        MessageQueue("t", "a", 1),
        MessageQueue("t", "b", 0),
        MessageQueue("t", "r", 0),
    )


def test_unquoted_keys_inside_nested_objects_parse() -> None:
    assert fastjson.loads('{"x":{0:"a:1",12:{3:[1]}}}') == {"x": {"0": "a:1", "12": {"3": [1]}}}
    assert fastjson.loads(json.dumps({"s": "{0:1}"})) == {"s": "{0:1}"}


def test_malformed_route_data_raises_codec_error() -> None:
    with pytest.raises(CodecError):
        TopicRoute.parse("t", b"not json")
    with pytest.raises(CodecError):
        TopicRoute.parse(
            "t", b'{"queueDatas":[{"brokerName":"a"}],"brokerDatas":[{"brokerName":"a"}]}'
        )


def test_select_queue_round_robins_and_avoids_a_failed_broker() -> None:
    queues = (MessageQueue("t", "a", 0), MessageQueue("t", "a", 1), MessageQueue("t", "b", 0))
    assert [select_queue(queues, n) for n in range(4)] == [*queues, queues[0]]
    assert {select_queue(queues, n, avoid_broker="a").broker_name for n in range(5)} == {"b"}
    only_a = queues[:2]
    assert select_queue(only_a, 1, avoid_broker="a") == only_a[1]
    with pytest.raises(InvalidArgumentError):
        select_queue((), 0)
