"""The admin requests mqadmin makes about consumption and about the broker itself, answered by
a broker context over a real store: GET_CONSUME_STATS, QUERY_TOPIC_CONSUME_BY_WHO,
GET_CONSUMER_CONNECTION_LIST, GET_BROKER_RUNTIME_INFO and GET_BROKER_CONFIG (request in,
response bytes out, in the shapes RocketMQ 4.9.8's client decodes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from reconsume.broker.admin_stats import AdminStatsProcessor
from reconsume.broker.consumers import ClientChannel, parse_subscription
from reconsume.broker.context import BrokerContext
from reconsume.broker.runtime_info import BrokerInfoProcessor, Throughput, human_bytes
from reconsume.broker.settings import BrokerSettings
from reconsume.message.address import HostAddress
from reconsume.store import FlushMode, MessageStore, PutRequest, StoreSettings
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.broker_headers import (
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from reconsume.wire.codes import LanguageCode, RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

HOST = HostAddress.parse("127.0.0.1:10911")


class StubConnection:
    """A client connection as the consumer registry sees it."""

    peer = "127.0.0.1:50123"

    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    def send(self, request: RemotingCommand) -> None:
        self.sent.append(request)


@pytest.fixture
def context(tmp_path: Path) -> Iterator[BrokerContext]:
    settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    with MessageStore(tmp_path, settings, store_host=HOST, background=False) as store:
        broker = BrokerSettings(
            store_dir=str(tmp_path),
            store=settings,
            broker_name="broker-x",
            cluster_name="c1",
            namesrv_addresses=("127.0.0.1:9876",),
            flush_mode=FlushMode.SYNC,
            delay_levels="1s 5s",
        )
        yield BrokerContext(broker, store, HOST, lambda: None)


def request(code: int, fields: dict[str, str] | None = None) -> RemotingCommand:
    return RemotingCommand.request(code, fields)


def stats(context: BrokerContext, group: str, topic: str | None = None) -> str:
    processor = AdminStatsProcessor(context, Throughput(context.stats, 0.0))
    header = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic)
    response = processor.consume_stats(
        request(RequestCode.GET_CONSUME_STATS, header.to_ext_fields()), cast(Connection, None)
    )
    assert response.code == ResponseCode.SUCCESS
    return response.body.decode()


def online(context: BrokerContext, group: str, *topics: str) -> StubConnection:
    connection = StubConnection()
    context.consumers.register_consumer(
        group,
        ClientChannel(cast(Connection, connection), "10.0.0.9@1", LanguageCode.JAVA, 409, 0.0),
        consume_type="CONSUME_PASSIVELY",
        message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        subscriptions=[parse_subscription(t, "a || b", "TAG", 7) for t in topics],
    )
    return connection


def test_consume_stats_is_fastjson_with_message_queue_keys(context: BrokerContext) -> None:
    context.ensure_topic("orders", 2)
    stored = [context.append(PutRequest(topic="orders", queue_id=0, body=b"x")) for _ in range(3)]
    context.append(PutRequest(topic="orders", queue_id=1, body=b"y"))
    context.store.consumer_offsets.set(consumer_offset_key("orders", "g"), 0, 2)
    # An offset in a topic the broker no longer has is left out, as RocketMQ does.
    context.store.consumer_offsets.set(consumer_offset_key("gone", "g"), 0, 5)

    expected = (
        '{"consumeTps":0.0,"offsetTable":{'
        '{"brokerName":"broker-x","queueId":0,"topic":"orders"}:'
        f'{{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":{stored[1].store_timestamp_ms}}},'
        '{"brokerName":"broker-x","queueId":1,"topic":"orders"}:'
        '{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0}}}'
    )
    assert stats(context, "g") == expected
    assert stats(context, "g", "orders") == expected
    assert stats(context, "nobody") == '{"consumeTps":0.0,"offsetTable":{}}'


def test_an_online_group_s_stats_cover_only_the_topics_it_subscribes_to(
    context: BrokerContext,
) -> None:
    for topic in ("orders", "audit"):
        context.ensure_topic(topic, 1)
        context.store.consumer_offsets.set(consumer_offset_key(topic, "g"), 0, 0)
    online(context, "g", "orders")
    assert '"topic":"orders"' in stats(context, "g")
    assert '"topic":"audit"' not in stats(context, "g")


def test_consume_stats_tps_counts_pulls_over_the_last_minute(context: BrokerContext) -> None:
    throughput = Throughput(context.stats, 0.0)
    context.stats.delivered("orders", "g", 30)
    throughput.sample(10.0)
    context.stats.delivered("orders", "g", 60)
    assert throughput.pulled_tps("orders", "g", 30.0) == 3.0  # 90 since the start, 30 s ago
    for at in range(20, 80, 10):
        throughput.sample(float(at))
    # The newest sample a minute old is the one at 10.0, taken after the first 30.
    assert throughput.pulled_tps("orders", "g", 70.0) == 1.0
    stored, pulled = throughput.tps(70.0)
    assert stored == [0.0, 0.0, 0.0]
    assert pulled == [0.0, 1.0, 90 / 70]


def test_query_topic_consume_by_who_names_online_and_committed_groups(
    context: BrokerContext,
) -> None:
    processor = AdminStatsProcessor(context, Throughput(context.stats, 0.0))
    context.store.consumer_offsets.set(consumer_offset_key("orders", "offline"), 0, 1)
    context.store.consumer_offsets.set(consumer_offset_key("audit", "other"), 0, 1)
    online(context, "live", "orders")
    header = QueryTopicConsumeByWhoRequestHeader(topic="orders")
    response = processor.consumed_by(
        request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header.to_ext_fields()),
        cast(Connection, None),
    )
    assert response.code == ResponseCode.SUCCESS
    assert response.body == b'{"groupList":["live","offline"]}'


def test_consumer_connection_list(context: BrokerContext) -> None:
    processor = AdminStatsProcessor(context, Throughput(context.stats, 0.0))

    def ask(group: str) -> RemotingCommand:
        header = GetConsumerConnectionListRequestHeader(consumer_group=group)
        return processor.connections(
            request(RequestCode.GET_CONSUMER_CONNECTION_LIST, header.to_ext_fields()),
            cast(Connection, None),
        )

    absent = ask("g")
    assert absent.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert absent.remark == "the consumer group[g] not online"
    online(context, "g", "orders")
    answer = ask("g")
    assert answer.code == ResponseCode.SUCCESS
    assert json.loads(answer.body) == {
        "connectionSet": [
            {
                "clientAddr": "127.0.0.1:50123",
                "clientId": "10.0.0.9@1",
                "language": "JAVA",
                "version": 409,
            }
        ],
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "subscriptionTable": {
            "orders": {
                "classFilterMode": False,
                "codeSet": sorted([97, 98]),
                "expressionType": "TAG",
                "subString": "a || b",
                "subVersion": 7,
                "tagsSet": ["a", "b"],
                "topic": "orders",
            }
        },
    }


def test_broker_runtime_info_is_a_kv_table(context: BrokerContext) -> None:
    first = context.append(PutRequest(topic="orders", queue_id=0, body=b"x"))
    last = context.append(PutRequest(topic="orders", queue_id=0, body=b"yy"))
    context.stats.stored("orders", 2, 3)
    processor = BrokerInfoProcessor(context, Throughput(context.stats, 0.0))
    response = processor.runtime_info(
        request(RequestCode.GET_BROKER_RUNTIME_INFO), cast(Connection, None)
    )
    assert response.code == ResponseCode.SUCCESS
    table = json.loads(response.body)["table"]
    assert all(isinstance(value, str) for value in table.values())
    assert {k: table[k] for k in ("brokerVersionDesc", "brokerVersion")} == {
        "brokerVersionDesc": "V4_9_8",
        "brokerVersion": "409",
    }
    assert table["commitLogMinOffset"] == "0"
    assert table["commitLogMaxOffset"] == str(last.end_offset)
    assert table["earliestMessageTimeStamp"] == str(first.store_timestamp_ms)
    assert table["putMessageTimesTotal"] == "2"
    assert table["getTransferedTps"] == "0.00 0.00 0.00"
    assert len(table["putTps"].split()) == 3
    assert table["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
    assert 0 <= float(table["commitLogDiskRatio"]) <= 1
    assert table["sendThreadPoolQueueSize"] == table["pageCacheLockTimeMills"] == "0"


def test_broker_runtime_info_of_an_empty_store_has_no_earliest_message(
    context: BrokerContext,
) -> None:
    processor = BrokerInfoProcessor(context, Throughput(context.stats, 0.0))
    assert processor.runtime_values()["earliestMessageTimeStamp"] == "-1"


def test_broker_config_is_java_properties_text(context: BrokerContext) -> None:
    processor = BrokerInfoProcessor(context, Throughput(context.stats, 0.0))
    response = processor.broker_config(
        request(RequestCode.GET_BROKER_CONFIG), cast(Connection, None)
    )
    assert response.code == ResponseCode.SUCCESS
    header = GetBrokerConfigResponseHeader.from_ext_fields(response.ext_fields)
    assert json.loads(header.version) == {"counter": 0, "timestamp": processor.boot_ms}
    text = response.body.decode()
    assert text.endswith("\n")
    values = dict(line.split("=", 1) for line in text.splitlines())
    assert values == {
        "brokerClusterName": "c1",
        "brokerName": "broker-x",
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "listenPort": "10911",
        "namesrvAddr": "127.0.0.1:9876",
        "storePathRootDir": str(context.store.root),
        "brokerRole": "ASYNC_MASTER",
        "brokerPermission": "6",
        "flushDiskType": "SYNC_FLUSH",
        "syncFlushTimeout": "5000",
        "flushIntervalCommitLog": "500",
        "flushConsumerOffsetInterval": "5000",
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        "defaultTopicQueueNums": "8",
        "messageDelayLevel": "1s 5s",
        "timerMaxDelaySec": "259200",
        "mappedFileSizeCommitLog": str(1 << 20),
        "mappedFileSizeConsumeQueue": "6000000",
        "maxMessageSize": "4096",
        "fileReservedTime": "72",
        "registerNameServerPeriod": "30000",
    }


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (5 << 30, "5.0 GiB")],
)
def test_human_bytes_as_rocketmq_prints_them(count: int, text: str) -> None:
    assert human_bytes(count) == text
