"""SendBack.fallback_message: the message sent to %RETRY%<group> when CONSUMER_SEND_MSG_BACK
fails, carrying the retry state as RocketMQ's DefaultMQPushConsumerImpl.sendMessageBack does."""

from __future__ import annotations

import pytest

from reconsume.client.namesrv import RouteCache
from reconsume.client.producer import Producer
from reconsume.client.sendback import SendBack
from reconsume.message import properties as props
from reconsume.wire.endpoints import RemotingClient
from tests.unit.client._helpers import stored

NAME_SERVERS = ["127.0.0.1:9876"]


@pytest.fixture
def send_back() -> SendBack:
    # Real collaborators, never used: fallback_message builds a message and sends nothing,
    # and none of these connect before a request.
    client = RemotingClient()
    return SendBack(
        client,
        RouteCache(client, NAME_SERVERS),
        Producer(NAME_SERVERS),
        "g",
        max_reconsume_times=16,
    )


def test_first_failure_goes_to_the_retry_topic_with_the_retry_state(send_back: SendBack) -> None:
    original = {
        props.TAGS: "TagA",
        props.KEYS: "k1 k2",
        props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UNIQ1",
        props.TRANSACTION_PREPARED: "true",
        "user": "value",
    }
    message = stored(
        topic="T", body=b"payload", flag=5, reconsume_times=0, properties=dict(original)
    )
    retry = send_back.fallback_message(message)
    assert retry.topic == "%RETRY%g"
    assert retry.body == b"payload"
    assert retry.flag == 5
    assert retry.properties == {
        props.TAGS: "TagA",
        props.KEYS: "k1 k2",
        props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UNIQ1",
        "user": "value",
        props.ORIGIN_MESSAGE_ID: "UNIQ1",
        props.RETRY_TOPIC: "T",
        props.RECONSUME_TIME: "1",
        props.MAX_RECONSUME_TIMES: "16",
        props.DELAY_TIME_LEVEL: "3",
    }
    assert retry.delay_level == 3
    assert message.properties == original  # the consumed message is left alone


def test_a_retried_message_keeps_its_first_topic_and_id(send_back: SendBack) -> None:
    message = stored(
        topic="%RETRY%g",
        reconsume_times=2,
        properties={
            props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UNIQ2",
            props.ORIGIN_MESSAGE_ID: "FIRST",
            props.RETRY_TOPIC: "T",
            props.RECONSUME_TIME: "2",
            props.MAX_RECONSUME_TIMES: "16",
            props.DELAY_TIME_LEVEL: "4",
        },
    )
    retry = send_back.fallback_message(message)
    assert retry.topic == "%RETRY%g"
    assert retry.properties[props.RETRY_TOPIC] == "T"
    assert retry.properties[props.ORIGIN_MESSAGE_ID] == "FIRST"
    assert retry.properties[props.RECONSUME_TIME] == "3"
    assert retry.properties[props.DELAY_TIME_LEVEL] == "5"


@pytest.mark.parametrize("reconsume_times", [0, 1, 5, 15])
def test_delay_level_is_three_plus_reconsume_times(
    send_back: SendBack, reconsume_times: int
) -> None:
    retry = send_back.fallback_message(stored(reconsume_times=reconsume_times))
    assert retry.properties[props.DELAY_TIME_LEVEL] == str(3 + reconsume_times)
    assert retry.properties[props.RECONSUME_TIME] == str(reconsume_times + 1)


def test_without_a_unique_key_the_offset_id_is_the_origin(send_back: SendBack) -> None:
    message = stored(commit_log_offset=0x1234, properties={})
    retry = send_back.fallback_message(message)
    # store host 10.0.0.1:10911 (0x2A9F), commit-log offset 0x1234
    assert retry.properties[props.ORIGIN_MESSAGE_ID] == "0A00000100002A9F0000000000001234"
    assert retry.properties[props.ORIGIN_MESSAGE_ID] == message.msg_id


def test_max_reconsume_times_is_the_consumers() -> None:
    client = RemotingClient()
    send_back = SendBack(
        client,
        RouteCache(client, NAME_SERVERS),
        Producer(NAME_SERVERS),
        "other",
        max_reconsume_times=3,
    )
    retry = send_back.fallback_message(stored(properties={props.MAX_RECONSUME_TIMES: "16"}))
    assert retry.topic == "%RETRY%other"
    assert retry.properties[props.MAX_RECONSUME_TIMES] == "3"


def test_an_orderly_dead_letter_keeps_its_reconsume_times(send_back: SendBack) -> None:
    # Orderly consumers give up with RECONSUME_TIME = the attempts so far (>= the maximum),
    # which the broker turns into a dead letter (RocketMQ's orderly sendMessageBack).
    message = stored(
        topic="T", reconsume_times=16, properties={props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U"}
    )
    retry = send_back.fallback_message(message, reconsume_time=message.reconsume_times)
    assert retry.properties[props.RECONSUME_TIME] == "16"
    assert retry.properties[props.MAX_RECONSUME_TIMES] == "16"
    assert retry.properties[props.RETRY_TOPIC] == "T"
    assert retry.delay_level == 19  # 3 + 16: the broker dead-letters it before any delay
