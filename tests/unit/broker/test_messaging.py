"""The gRPC service's conversions: 5.x messages into the broker's sends, routes into message
queues, group configs into the retry policy clients get, remoting codes into statuses."""

from __future__ import annotations

import gzip
import time

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from reconsume.broker.messaging.local import peer_of
from reconsume.broker.messaging.produce import send_request
from reconsume.broker.messaging.routes import accepted_types, endpoints, queues_of
from reconsume.broker.messaging.settings import group_backoff
from reconsume.broker.messaging.status import Refused, from_remoting
from reconsume.engine.delays import DelayLevels
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.wire.broker_headers import SendMessageRequestHeader
from reconsume.wire.codes import ResponseCode
from reconsume.wire.v2 import definition_pb2 as pb

MAX_DELAY_MS = 86_400_000
LEVELS = DelayLevels.parse("1s 5s 10s 30s 1m")


def _message(**system: object) -> pb.Message:
    fields: dict[str, object] = {"message_id": "id-1", "body_encoding": pb.IDENTITY, **system}
    return pb.Message(
        topic=pb.Resource(name="orders"),
        body=b"payload",
        user_properties={"color": "blue"},
        system_properties=pb.SystemProperties(**fields),  # type: ignore[arg-type]
    )


def _sent(message: pb.Message) -> tuple[SendMessageRequestHeader, dict[str, str], bytes]:
    request = send_request(message, MAX_DELAY_MS)
    header = SendMessageRequestHeader.from_ext_fields(request.ext_fields)
    return header, props.decode_properties(header.properties or ""), request.body


def test_a_normal_message_keeps_its_id_tag_keys_properties_and_queue() -> None:
    header, properties, body = _sent(
        _message(tag="paid", keys=["k1", "k2"], queue_id=3, message_type=pb.NORMAL)
    )
    assert (header.topic, header.queue_id, body) == ("orders", 3, b"payload")
    assert properties[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "id-1"
    assert properties[props.TAGS] == "paid"
    assert properties[props.KEYS] == "k1 k2"
    assert properties["color"] == "blue"


def test_a_fifo_message_carries_its_group_and_a_delayed_one_its_time() -> None:
    _, fifo, _ = _sent(_message(message_type=pb.FIFO, message_group="g-1"))
    assert fifo[props.SHARDING_KEY] == "g-1"
    due_ms = int(time.time() * 1000) + 5_000
    stamp = Timestamp(seconds=due_ms // 1000, nanos=(due_ms % 1000) * 1_000_000)
    _, delayed, _ = _sent(_message(message_type=pb.DELAY, delivery_timestamp=stamp))
    assert delayed[props.TIMER_DELIVER_MS] == str(due_ms)


def test_a_gzip_body_is_stored_inflated() -> None:
    message = _message(body_encoding=pb.GZIP)
    message.body = gzip.compress(b"inflated")
    assert _sent(message)[2] == b"inflated"


@pytest.mark.parametrize(
    ("system", "body", "code"),
    [
        ({"message_type": pb.FIFO}, b"x", pb.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": pb.FIFO, "message_group": "g" * 65}, b"x", pb.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": pb.NORMAL, "message_group": "g"}, b"x",
         pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        ({"message_type": pb.DELAY}, b"x", pb.ILLEGAL_DELIVERY_TIME),
        ({"delivery_timestamp": Timestamp(seconds=10**12)}, b"x", pb.ILLEGAL_DELIVERY_TIME),
        ({"message_type": pb.TRANSACTION}, b"x", pb.UNSUPPORTED),
        ({"tag": "a|b"}, b"x", pb.ILLEGAL_MESSAGE_TAG),
        ({"keys": [" "]}, b"x", pb.ILLEGAL_MESSAGE_KEY),
        ({"message_id": ""}, b"x", pb.ILLEGAL_MESSAGE_ID),
        ({}, b"", pb.MESSAGE_BODY_EMPTY),
        ({"body_encoding": pb.GZIP}, b"not gzip", pb.MESSAGE_CORRUPTED),
    ],
)  # fmt: skip
def test_a_message_that_is_not_what_its_type_says_is_refused_with_the_proxys_code(
    system: dict[str, object], body: bytes, code: int
) -> None:
    message = _message(**system)
    message.body = body
    with pytest.raises(Refused) as refused:
        send_request(message, MAX_DELAY_MS)
    assert refused.value.code == code


def test_queues_follow_the_proxys_order_read_only_then_write_only_then_both() -> None:
    broker = pb.Broker(name="b", id=0, endpoints=endpoints("127.0.0.1:8081"))
    topic = pb.Resource(name="t")
    data = {"brokerName": "b", "perm": 6, "readQueueNums": 6, "writeQueueNums": 4}
    queues = queues_of(data, topic, broker, (pb.NORMAL,))
    assert [(q.id, q.permission) for q in queues] == [
        (0, pb.READ), (1, pb.READ), (2, pb.READ_WRITE), (3, pb.READ_WRITE),
        (4, pb.READ_WRITE), (5, pb.READ_WRITE),
    ]  # fmt: skip
    read_only = queues_of({**data, "perm": 4}, topic, broker, (pb.NORMAL,))
    assert {q.permission for q in read_only} == {pb.READ}
    assert len(queues_of({**data, "perm": 0}, topic, broker, (pb.NORMAL,))) == 6


def test_endpoints_and_accepted_types() -> None:
    assert endpoints("[::1]:8081").scheme == pb.IPv6
    assert endpoints("broker-0.mq:8081").scheme == pb.DOMAIN_NAME
    assert endpoints("10.0.0.1:8081").addresses[0].port == 8081
    assert accepted_types(TopicConfig("t", attributes={"message.type": "FIFO"})) == (pb.FIFO,)
    assert len(accepted_types(TopicConfig("t"))) == 4  # no type: whatever 4.x sends
    assert len(accepted_types(None)) == 4


def test_a_groups_retry_policy_is_what_its_clients_are_told() -> None:
    exponential = SubscriptionGroupConfig(
        group_name="g",
        retry_max_times=4,
        group_retry_policy={
            "type": "EXPONENTIAL",
            "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2},
        },
    )
    policy = group_backoff(exponential, LEVELS, MAX_DELAY_MS)
    assert policy.max_attempts == 5
    assert policy.exponential_backoff.initial.seconds == 1
    assert policy.exponential_backoff.max.seconds == 60
    assert policy.exponential_backoff.multiplier == 2.0
    customized = SubscriptionGroupConfig(
        group_name="g",
        group_retry_policy={"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [500, 2000]}},
    )
    nexts = group_backoff(customized, LEVELS, MAX_DELAY_MS).customized_backoff.next
    assert [d.ToMilliseconds() for d in nexts] == [500, 2000]
    levels = group_backoff(SubscriptionGroupConfig(group_name="g"), LEVELS, MAX_DELAY_MS)
    # the delay levels from level 3 on, as a 4.x consumer's send-back gets them
    assert [d.ToMilliseconds() for d in levels.customized_backoff.next] == [10_000, 30_000, 60_000]


def test_statuses_and_peers() -> None:
    assert from_remoting(ResponseCode.SUCCESS, None).code == pb.OK
    assert from_remoting(ResponseCode.FLUSH_SLAVE_TIMEOUT, "x").code == pb.SLAVE_PERSISTENCE_TIMEOUT
    assert from_remoting(ResponseCode.NO_PERMISSION, "x").code == pb.FORBIDDEN
    assert from_remoting(ResponseCode.SYSTEM_ERROR, "boom").code == pb.INTERNAL_SERVER_ERROR
    # a Sync write with no replica in sync: answered without a remark, the code's name said
    unavailable = from_remoting(ResponseCode.SLAVE_NOT_AVAILABLE, "")
    assert (unavailable.code, unavailable.message) == (
        pb.HA_NOT_AVAILABLE,
        "SLAVE_NOT_AVAILABLE (11)",
    )
    assert from_remoting(999, None).message == "999"
    assert peer_of("ipv4:127.0.0.1:5000") == ("127.0.0.1", 5000)
    assert peer_of("ipv6:[::1]:5000") == ("::1", 5000)
    assert peer_of("unix:/tmp/socket") == ("0.0.0.0", 0)
