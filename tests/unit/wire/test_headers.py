"""Custom headers: wire names, required fields and types as RocketMQ 4.9.8 declares them,
round trips through extFields and whole frames, and SEND_MESSAGE_V2's short names."""

from __future__ import annotations

import dataclasses
import types
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.wire import broker_headers, headers
from reconsume.wire.broker_headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
)
from reconsume.wire.codes import RequestCode, SerializeType
from reconsume.wire.command import RemotingCommand
from reconsume.wire.frame import decode_frame, encode_frame
from reconsume.wire.headers import Header, HeaderError
from tests.unit.wire.strategies import text


def header_classes(module: types.ModuleType) -> list[type[Header]]:
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header
    ]


ALL_HEADERS = header_classes(headers) + header_classes(broker_headers)
STR, INT, BOOL = "str", "int", "bool"
H = TypeVar("H", bound=Header)

# (wire name, Java type, @CFNotNull) in the order of the Java class's fields, from
# org.apache.rocketmq.common.protocol.header in 4.9.8; "bname" is RpcRequestHeader's field.
JAVA_FIELDS: dict[str, list[tuple[str, str, bool]]] = {
    "SendMessageRequestHeader": [
        ("producerGroup", STR, True),
        ("topic", STR, True),
        ("defaultTopic", STR, True),
        ("defaultTopicQueueNums", INT, True),
        ("queueId", INT, True),
        ("sysFlag", INT, True),
        ("bornTimestamp", INT, True),
        ("flag", INT, True),
        ("properties", STR, False),
        ("reconsumeTimes", INT, False),
        ("unitMode", BOOL, False),
        ("batch", BOOL, False),
        ("maxReconsumeTimes", INT, False),
        ("bname", STR, False),
    ],
    "SendMessageRequestHeaderV2": [
        ("a", STR, True),
        ("b", STR, True),
        ("c", STR, True),
        ("d", INT, True),
        ("e", INT, True),
        ("f", INT, True),
        ("g", INT, True),
        ("h", INT, True),
        ("i", STR, False),
        ("j", INT, False),
        ("k", BOOL, False),
        ("l", INT, False),
        ("m", BOOL, False),
        ("n", STR, False),
    ],
    "SendMessageResponseHeader": [
        ("msgId", STR, True),
        ("queueId", INT, True),
        ("queueOffset", INT, True),
        ("transactionId", STR, False),
    ],
    "EndTransactionRequestHeader": [
        ("producerGroup", STR, True),
        ("tranStateTableOffset", INT, True),
        ("commitLogOffset", INT, True),
        ("commitOrRollback", INT, True),
        ("fromTransactionCheck", BOOL, False),
        ("msgId", STR, True),
        ("transactionId", STR, False),
        ("bname", STR, False),
    ],
    "PullMessageRequestHeader": [
        ("consumerGroup", STR, True),
        ("topic", STR, True),
        ("queueId", INT, True),
        ("queueOffset", INT, True),
        ("maxMsgNums", INT, True),
        ("sysFlag", INT, True),
        ("commitOffset", INT, True),
        ("suspendTimeoutMillis", INT, True),
        ("subscription", STR, False),
        ("subVersion", INT, True),
        ("expressionType", STR, False),
        ("bname", STR, False),
        # reconsume's own (broker_headers.BULK_FIELD), which Apache RocketMQ's brokers ignore
        ("reconsumeBulk", BOOL, False),
    ],
    "PullMessageResponseHeader": [
        ("suggestWhichBrokerId", INT, True),
        ("nextBeginOffset", INT, True),
        ("minOffset", INT, True),
        ("maxOffset", INT, True),
    ],
    "QueryConsumerOffsetRequestHeader": [
        ("consumerGroup", STR, True),
        ("topic", STR, True),
        ("queueId", INT, True),
        ("bname", STR, False),
    ],
    "QueryConsumerOffsetResponseHeader": [("offset", INT, True)],
    "UpdateConsumerOffsetRequestHeader": [
        ("consumerGroup", STR, True),
        ("topic", STR, True),
        ("queueId", INT, True),
        ("commitOffset", INT, True),
        ("bname", STR, False),
    ],
    "ConsumerSendMsgBackRequestHeader": [
        ("offset", INT, True),
        ("group", STR, True),
        ("delayLevel", INT, True),
        ("originMsgId", STR, False),
        ("originTopic", STR, False),
        ("unitMode", BOOL, False),
        ("maxReconsumeTimes", INT, False),
        ("bname", STR, False),
    ],
    "GetMaxOffsetRequestHeader": [
        ("topic", STR, True),
        ("queueId", INT, True),
        ("bname", STR, False),
    ],
    "GetMaxOffsetResponseHeader": [("offset", INT, True)],
    "GetMinOffsetRequestHeader": [
        ("topic", STR, True),
        ("queueId", INT, True),
        ("bname", STR, False),
    ],
    "GetMinOffsetResponseHeader": [("offset", INT, True)],
    "SearchOffsetRequestHeader": [
        ("topic", STR, True),
        ("queueId", INT, True),
        ("timestamp", INT, True),
        ("bname", STR, False),
    ],
    "SearchOffsetResponseHeader": [("offset", INT, True)],
    "GetEarliestMsgStoretimeRequestHeader": [
        ("topic", STR, True),
        ("queueId", INT, True),
        ("bname", STR, False),
    ],
    "GetEarliestMsgStoretimeResponseHeader": [("timestamp", INT, True)],
    "ViewMessageRequestHeader": [("offset", INT, True)],
    "QueryMessageRequestHeader": [
        ("topic", STR, True),
        ("key", STR, True),
        ("maxNum", INT, True),
        ("beginTimestamp", INT, True),
        ("endTimestamp", INT, True),
    ],
    "QueryMessageResponseHeader": [
        ("indexLastUpdateTimestamp", INT, True),
        ("indexLastUpdatePhyoffset", INT, True),
    ],
    "UnregisterClientRequestHeader": [
        ("clientID", STR, True),
        ("producerGroup", STR, False),
        ("consumerGroup", STR, False),
    ],
    "GetConsumerListByGroupRequestHeader": [("consumerGroup", STR, True)],
    "NotifyConsumerIdsChangedRequestHeader": [("consumerGroup", STR, True)],
    "GetConsumerRunningInfoRequestHeader": [
        ("consumerGroup", STR, True),
        ("clientId", STR, True),
        ("jstackEnable", BOOL, False),
    ],
    "ConsumeMessageDirectlyResultRequestHeader": [
        ("consumerGroup", STR, True),
        ("clientId", STR, False),
        ("msgId", STR, False),
        ("brokerName", STR, False),
    ],
    "CreateTopicRequestHeader": [
        ("topic", STR, True),
        ("defaultTopic", STR, True),
        ("readQueueNums", INT, True),
        ("writeQueueNums", INT, True),
        ("perm", INT, True),
        ("topicFilterType", STR, True),
        ("topicSysFlag", INT, False),
        ("order", BOOL, True),
    ],
    "DeleteTopicRequestHeader": [("topic", STR, True)],
    "DeleteSubscriptionGroupRequestHeader": [
        ("groupName", STR, True),
        ("removeOffset", BOOL, False),
    ],
    "GetConsumeStatsRequestHeader": [("consumerGroup", STR, True), ("topic", STR, False)],
    "QueryTopicConsumeByWhoRequestHeader": [("topic", STR, True)],
    "GetConsumerConnectionListRequestHeader": [("consumerGroup", STR, True)],
    "GetBrokerConfigResponseHeader": [("version", STR, True)],
}


def test_every_broker_header_is_checked_against_java() -> None:
    assert {cls.__name__ for cls in header_classes(broker_headers)} == set(JAVA_FIELDS)


@pytest.mark.parametrize("name", sorted(JAVA_FIELDS))
def test_fields_match_java(name: str) -> None:
    cls = getattr(broker_headers, name)
    spec = [(wire, kind, required) for _attr, wire, kind, required in cls._fields()]
    assert spec == JAVA_FIELDS[name]


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_header_classes_are_frozen_dataclasses(cls: type[Header]) -> None:
    header = cls.from_ext_fields(full_ext(cls))
    attr = cls._fields()[0][0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(header, attr, None)


# ---------------------------------------------------------------------------- round trips
JAVA_LONG = st.integers(-(2**63), 2**63 - 1)


def value_strategy(kind: str) -> st.SearchStrategy[object]:
    if kind == INT:
        return JAVA_LONG
    if kind == BOOL:
        return st.booleans()
    return text


@st.composite
def header_values(draw: st.DrawFn, cls: type[H]) -> H:
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        attr, _wire, kind, required = next(s for s in cls._fields() if s[0] == field.name)
        if required or draw(st.booleans()):
            values[attr] = draw(value_strategy(kind))
        elif field.default is None and draw(st.booleans()):
            values[attr] = None
    return cls(**values)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_ext_fields_round_trip(cls: type[Header], data: st.DataObject) -> None:
    header = data.draw(header_values(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())
    assert set(ext) <= {wire for _a, wire, _k, _r in cls._fields()}
    assert cls.from_ext_fields(ext) == header


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda k: k.name)
@given(data=st.data())
def test_frame_round_trip(cls: type[Header], kind: SerializeType, data: st.DataObject) -> None:
    header = data.draw(header_values(cls))
    cmd = RemotingCommand.request(1, header.to_ext_fields(), serialize_type=kind)
    assert cls.from_ext_fields(decode_frame(encode_frame(cmd)).ext_fields) == header


def test_values_travel_as_java_writes_them() -> None:
    header = CreateTopicRequestHeader(
        topic="T",
        default_topic="TBW102",
        read_queue_nums=8,
        write_queue_nums=8,
        perm=6,
        topic_filter_type="SINGLE_TAG",
        order=False,
    )
    assert header.to_ext_fields() == {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",  # a Boolean initialised to false is always sent
    }


def test_unknown_ext_fields_are_ignored() -> None:
    ext = {"clientID": "c1", "unexpected": "x", "bname": "b"}
    assert UnregisterClientRequestHeader.from_ext_fields(ext) == UnregisterClientRequestHeader(
        client_id="c1"
    )


def test_java_boolean_parsing() -> None:
    base = {"groupName": "g"}
    cls = broker_headers.DeleteSubscriptionGroupRequestHeader
    assert cls.from_ext_fields({**base, "removeOffset": "TRUE"}).remove_offset is True
    assert cls.from_ext_fields({**base, "removeOffset": "yes"}).remove_offset is False
    assert cls.from_ext_fields(base).remove_offset is False


# ---------------------------------------------------------------------------- errors
def required_cases() -> list[tuple[type[Header], str]]:
    return [
        (cls, wire)
        for cls in ALL_HEADERS
        for _attr, wire, _kind, required in cls._fields()
        if required
    ]


@pytest.mark.parametrize(("cls", "wire"), required_cases(), ids=lambda v: getattr(v, "__name__", v))
def test_missing_required_field(cls: type[Header], wire: str) -> None:
    ext = full_ext(cls)
    del ext[wire]
    with pytest.raises(HeaderError, match=f"{cls.__name__}: field '{wire}' is required"):
        cls.from_ext_fields(ext)


def full_ext(cls: type[Header]) -> dict[str, str]:
    samples = {STR: "s", INT: "1", BOOL: "true"}
    return {wire: samples[kind] for _attr, wire, kind, _required in cls._fields()}


def int_cases() -> list[tuple[type[Header], str]]:
    return [
        (cls, wire) for cls in ALL_HEADERS for _a, wire, kind, _r in cls._fields() if kind == INT
    ]


@pytest.mark.parametrize(("cls", "wire"), int_cases(), ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("bad", ["", "x", "1.5", "0x10", "1e3"])
def test_integer_field_of_wrong_type(cls: type[Header], wire: str, bad: str) -> None:
    ext = full_ext(cls)
    ext[wire] = bad
    with pytest.raises(HeaderError, match=f"field '{wire}' must be an integer"):
        cls.from_ext_fields(ext)


def test_header_error_is_an_invalid_argument() -> None:
    from reconsume.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        PullMessageRequestHeader.from_ext_fields({})


# ---------------------------------------------------------------------------- V2
def test_v2_wire_names_are_a_to_n() -> None:
    names = [wire for _attr, wire, _kind, _required in SendMessageRequestHeaderV2._fields()]
    assert names == list("abcdefghijklmn")


def test_v2_attributes_are_v1_attributes() -> None:
    v1 = [f.name for f in dataclasses.fields(SendMessageRequestHeader)]
    v2 = [f.name for f in dataclasses.fields(SendMessageRequestHeaderV2)]
    assert sorted(v1) == sorted(v2)
    # k, l, m: unitMode, maxReconsumeTimes, batch (V1 declares batch before maxReconsumeTimes)
    assert v2[10:13] == ["unit_mode", "max_reconsume_times", "batch"]


SEND_V1 = SendMessageRequestHeader(
    producer_group="pg",
    topic="TopicTest",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=3,
    sys_flag=0,
    born_timestamp=1_700_000_000_000,
    flag=0,
    properties="TAGS\x01a\x02KEYS\x01k\x02",
    reconsume_times=2,
    unit_mode=False,
    batch=True,
    max_reconsume_times=16,
    broker_name="broker-a",
)


def test_v2_wire_form() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(SEND_V1)
    assert v2.to_ext_fields() == {
        "a": "pg",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01a\x02KEYS\x01k\x02",
        "j": "2",
        "k": "false",
        "l": "16",
        "m": "true",
        "n": "broker-a",
    }
    assert SEND_V1.to_ext_fields()["bname"] == "broker-a"


def test_v1_v2_conversion() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(SEND_V1)
    assert isinstance(v2, SendMessageRequestHeaderV2)
    assert v2.producer_group == "pg"
    assert v2.max_reconsume_times == 16
    assert v2.batch is True
    assert v2.broker_name == "broker-a"
    assert v2.to_v1() == SEND_V1


@given(header_values(SendMessageRequestHeader))
def test_v1_v2_round_trip(v1: SendMessageRequestHeader) -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(v1)
    assert v2.to_v1() == v1
    assert SendMessageRequestHeaderV2.from_ext_fields(v2.to_ext_fields()) == v2
    # the same values under both names
    by_attr = {attr: wire for attr, wire, _k, _r in SendMessageRequestHeader._fields()}
    ext_v1 = v1.to_ext_fields()
    ext_v2 = v2.to_ext_fields()
    for attr, wire_v2, _kind, _required in SendMessageRequestHeaderV2._fields():
        assert ext_v2.get(wire_v2) == ext_v1.get(by_attr[attr])


@given(header_values(SendMessageRequestHeaderV2))
def test_v2_v1_round_trip(v2: SendMessageRequestHeaderV2) -> None:
    assert SendMessageRequestHeaderV2.from_v1(v2.to_v1()) == v2


def test_v2_missing_short_field_names_it() -> None:
    ext = SendMessageRequestHeaderV2.from_v1(SEND_V1).to_ext_fields()
    del ext["g"]
    with pytest.raises(HeaderError, match="'g' is required"):
        SendMessageRequestHeaderV2.from_ext_fields(ext)


def test_v2_request_in_a_frame() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(SEND_V1)
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        v2.to_ext_fields(),
        b"body",
        serialize_type=SerializeType.ROCKETMQ,
    )
    decoded = decode_frame(encode_frame(cmd))
    assert SendMessageRequestHeaderV2.from_ext_fields(decoded.ext_fields).to_v1() == SEND_V1
