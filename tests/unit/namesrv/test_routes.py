"""The route table as pure state, and fastjson-compatible JSON."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from reconsume.message.configs import TopicConfig
from reconsume.namesrv.routes import RouteTable
from reconsume.wire import fastjson


def register(
    table: RouteTable,
    name: str,
    addr: str,
    topics: dict[str, int] | None,
    *,
    broker_id: int = 0,
    now: float = 0.0,
    version: int = 1,
    cluster: str = "c",
) -> None:
    table.register(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr + "-ha",
        topics=None
        if topics is None
        else {t: TopicConfig(t, read_queue_nums=n, write_queue_nums=n) for t, n in topics.items()},
        data_version={"counter": version},
        now_s=now,
    )


def test_route_lists_every_broker_serving_the_topic() -> None:
    table = RouteTable()
    register(table, "b", "h2:1", {"t": 2})
    register(table, "a", "h1:1", {"t": 4, "u": 1})
    route = table.route("t")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["a", "b"]
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [4, 2]
    assert [b["brokerAddrs"] for b in route["brokerDatas"]] == [{0: "h1:1"}, {0: "h2:1"}]
    assert table.route("missing") is None
    assert table.topic_names() == ["t", "u"]


def test_a_slave_learns_its_master_and_does_not_change_topics() -> None:
    table = RouteTable()
    register(table, "a", "m:1", {"t": 2})
    result = table.register(
        cluster="c",
        broker_addr="s:1",
        broker_name="a",
        broker_id=1,
        ha_server_addr="s:2",
        topics={"other": TopicConfig("other")},
        data_version={"counter": 9},
        now_s=0.0,
    )
    assert result.master_addr == "m:1"
    assert result.ha_server_addr == "m:1-ha"
    assert table.topic_names() == ["t"]
    route = table.route("t")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: "m:1", 1: "s:1"}


def test_topics_follow_the_latest_registration_of_a_master() -> None:
    table = RouteTable()
    register(table, "a", "h:1", {"t": 2, "gone": 2}, version=1)
    register(table, "a", "h:1", {"t": 2}, version=2)
    assert table.route("gone") is None
    register(table, "a", "h:1", {"t": 2, "gone": 1}, version=2)  # same version: unchanged
    assert table.route("gone") is None


def test_expiry_and_unregister_remove_brokers_and_empty_topics() -> None:
    table = RouteTable()
    register(table, "a", "h1:1", {"t": 1}, now=0.0)
    register(table, "b", "h2:1", {"t": 1}, now=100.0, cluster="d")
    assert table.expire(now_s=130.0, expiry_s=120.0) == ["h1:1"]
    route = table.route("t")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["b"]
    assert table.cluster_info()["clusterAddrTable"] == {"d": ["b"]}
    assert table.unregister(cluster="d", broker_addr="h2:1", broker_name="b", broker_id=0)
    assert table.route("t") is None
    assert table.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_delete_topic_in_one_cluster_keeps_it_in_another() -> None:
    table = RouteTable()
    register(table, "a", "h1:1", {"t": 1}, cluster="c1")
    register(table, "b", "h2:1", {"t": 1}, cluster="c2")
    assert table.delete_topic("t", "c1")
    route = table.route("t")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["b"]
    assert table.topic_names("c1") == []
    assert table.topic_names("c2") == ["t"]


def test_fastjson_form_leaves_integer_keys_unquoted() -> None:
    value = {"brokerAddrs": {1: "s", 0: "m"}, "name": "x", "list": [1, "a"], "set": {"b", "a"}}
    assert (
        fastjson.dumps(value, standard=False)
        == '{"brokerAddrs":{0:"m",1:"s"},"list":[1,"a"],"name":"x","set":["a","b"]}'
    )
    assert json.loads(fastjson.dumps(value, standard=True))["brokerAddrs"] == {"0": "m", "1": "s"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_standard_form_is_json_for_any_value(value: object) -> None:
    assert json.loads(fastjson.dumps(value, standard=True)) == value


def test_a_master_older_than_one_seen_is_refused() -> None:
    table = RouteTable()
    assert table.stale_master("b", "10.0.0.1:1", 0) is None  # no epoch: not judged
    assert table.stale_master("b", "10.0.0.1:1", 1) is None
    assert table.stale_master("b", "10.0.0.1:1", 1) is None  # the same master again
    assert table.stale_master("b", "10.0.0.2:1", 2) is None  # elected after it
    refused = table.stale_master("b", "10.0.0.1:1", 1)
    assert refused == (
        "broker b: 10.0.0.1:1 registers as master in epoch 1, 10.0.0.2:1 was master in epoch 2"
    )
    assert table.stale_master("b", "10.0.0.3:1", 2) is not None  # one master per epoch
    # ... but the master of an epoch may move to its broker name's stable address
    assert table.stale_master("b", "10.96.0.9:10911", 2, stable=True) is None
    assert table.stale_master("b", "10.0.0.2:1", 2) is not None  # and not back
    assert table.stale_master("b", "10.96.0.8:10911", 1, stable=True) is not None
    assert table.stale_master("other", "10.0.0.1:1", 1) is None
