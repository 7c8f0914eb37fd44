"""Delayed messages: where they are stored, their due-time tag code, how they come back out,
and the retry or dead letter a send-back stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import DelayLevels
from reconsume.engine.retry import DeadLetterReason, RetryDecision
from reconsume.engine.retry_message import mark_dead_letter, send_back_request
from reconsume.engine.scheduled import (
    correct_due_ms,
    delay_level_of,
    restore,
    schedule_tags_code,
    to_schedule,
)
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.codec import encode_record
from reconsume.message.decode import decode_record
from reconsume.message.ids import offset_msg_id
from reconsume.message.model import StoredMessage
from reconsume.message.names import SCHEDULE_TOPIC, TIMER_TOPIC
from reconsume.message.tags import tags_code
from reconsume.store import default_tags_code

LEVELS = DelayLevels((100, 200, 300))
STORE_HOST = HostAddress(b"\x7f\x00\x00\x01", 10911)
BORN_HOST = HostAddress(b"\x0a\x00\x00\x07", 40000)


def stored(
    topic: str, properties: dict[str, str], *, offset: int = 4096, reconsume_times: int = 0
) -> StoredMessage:
    return StoredMessage(
        store_size=0,
        body_crc=0,
        queue_id=3,
        flag=7,
        queue_offset=11,
        commit_log_offset=offset,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        born_host=BORN_HOST,
        store_timestamp_ms=1_700_000_000_500,
        store_host=STORE_HOST,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=0,
        body=b"payload",
        topic=topic,
        properties=properties,
    )


def record_of(message: StoredMessage) -> bytes:
    return encode_record(
        queue_id=message.queue_id,
        flag=message.flag,
        queue_offset=message.queue_offset,
        physical_offset=message.commit_log_offset,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=message.born_host,
        store_timestamp_ms=message.store_timestamp_ms,
        store_host=message.store_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
        body=message.body,
        topic=message.topic,
        properties=props.encode_properties(message.properties),
    )


@pytest.mark.parametrize(
    ("value", "level"), [(None, 0), ("", 0), ("x", 0), ("0", 0), ("-1", -1), ("2", 2)]
)
def test_delay_level_of(value: str | None, level: int) -> None:
    assert delay_level_of(value) == level


def test_a_delayed_message_goes_to_its_level_queue() -> None:
    properties = {props.DELAY_TIME_LEVEL: "2", props.TAGS: "t"}
    assert to_schedule(properties, "orders", 5, LEVELS) == (SCHEDULE_TOPIC, 1)
    assert properties == {
        props.DELAY_TIME_LEVEL: "2",
        props.TAGS: "t",
        props.REAL_TOPIC: "orders",
        props.REAL_QUEUE_ID: "5",
    }
    clamped = {props.DELAY_TIME_LEVEL: "40"}
    assert to_schedule(clamped, "orders", 0, LEVELS) == (SCHEDULE_TOPIC, 2)
    assert clamped[props.DELAY_TIME_LEVEL] == "3"
    for value in ("0", "-1", "nope"):
        untouched = {props.DELAY_TIME_LEVEL: value}
        assert to_schedule(untouched, "orders", 1, LEVELS) == ("orders", 1)
        assert untouched == {props.DELAY_TIME_LEVEL: value}


def test_the_tag_code_of_a_schedule_entry_is_its_due_time() -> None:
    hook = schedule_tags_code(LEVELS)
    scheduled = props.encode_properties({props.DELAY_TIME_LEVEL: "2", props.TAGS: "t"})
    assert hook(SCHEDULE_TOPIC, scheduled, 1_000) == 1_200
    clamped = props.encode_properties({props.DELAY_TIME_LEVEL: "9"})
    assert hook(SCHEDULE_TOPIC, clamped, 1_000) == 1_300
    tagged = props.encode_properties({props.TAGS: "t"})
    assert hook(SCHEDULE_TOPIC, tagged, 1_000) == tags_code("t")  # no delay: as any topic
    assert hook("orders", scheduled, 1_000) == default_tags_code("orders", scheduled, 1_000)
    assert hook("orders", scheduled, 1_000) == tags_code("t")


@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(1, 10**7))
def test_a_due_time_beyond_the_whole_delay_is_now(due_ms: int, now_ms: int, delay: int) -> None:
    corrected = correct_due_ms(due_ms, now_ms, delay)
    assert corrected == (now_ms if due_ms > now_ms + delay else due_ms)
    assert corrected <= now_ms + delay


def test_restore_puts_the_message_back_on_its_real_topic() -> None:
    properties = {
        props.DELAY_TIME_LEVEL: "2",
        props.REAL_TOPIC: "%RETRY%g",
        props.REAL_QUEUE_ID: "4",
        props.RETRY_TOPIC: "orders",
        props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "u",
    }
    record = record_of(stored(SCHEDULE_TOPIC, properties, reconsume_times=3))
    put = restore(record, 8192)
    assert (put.topic, put.queue_id, put.body, put.flag) == ("%RETRY%g", 4, b"payload", 7)
    assert put.reconsume_times == 3
    assert put.born_timestamp_ms == 1_700_000_000_000
    assert put.born_host == BORN_HOST.packed()
    restored = props.decode_properties(put.properties)
    assert props.DELAY_TIME_LEVEL not in restored
    assert restored[props.SCHEDULE_ORIGIN] == "8192"
    assert restored[props.RETRY_TOPIC] == "orders"
    assert restored[props.REAL_TOPIC] == "%RETRY%g"  # kept, as RocketMQ does


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {props.REAL_TOPIC: "orders"},
        {props.REAL_TOPIC: "orders", props.REAL_QUEUE_ID: "x"},
        {props.REAL_TOPIC: SCHEDULE_TOPIC, props.REAL_QUEUE_ID: "0"},
    ],
)
def test_restore_refuses_a_record_without_a_real_destination(bad: dict[str, str]) -> None:
    with pytest.raises(InvalidArgumentError, match="REAL_TOPIC"):
        restore(record_of(stored(SCHEDULE_TOPIC, bad)), 0)


def test_a_retry_keeps_the_message_and_waits_in_its_level() -> None:
    original = stored("orders", {props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "u", props.TAGS: "t"})
    put = send_back_request(
        original, group="g", decision=RetryDecision.retry(2), queue_id=1, levels=LEVELS, now_ms=5
    )
    assert (put.topic, put.queue_id) == (SCHEDULE_TOPIC, 1)
    assert (put.body, put.flag, put.reconsume_times) == (b"payload", 7, 1)
    assert (put.born_timestamp_ms, put.born_host) == (1_700_000_000_000, BORN_HOST.packed())
    p = props.decode_properties(put.properties)
    assert p[props.RETRY_TOPIC] == "orders"
    assert p[props.ORIGIN_MESSAGE_ID] == offset_msg_id(STORE_HOST, 4096)
    assert (p[props.REAL_TOPIC], p[props.REAL_QUEUE_ID], p[props.DELAY_TIME_LEVEL]) == (
        "%RETRY%g",
        "1",
        "2",
    )
    assert p[props.TAGS] == "t"
    assert props.DLQ_ORIGIN_TOPIC not in p


@pytest.mark.parametrize(("delay_ms", "where"), [(0, ("%RETRY%g", 1)), (5, (TIMER_TOPIC, 0))])
def test_a_retry_due_at_once_is_stored_in_the_retry_topic_itself(
    delay_ms: int, where: tuple[str, int]
) -> None:
    original = stored("orders", {props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "u"})
    decision = RetryDecision.retry_after(delay_ms)
    put = send_back_request(
        original, group="g", decision=decision, queue_id=1, levels=LEVELS, now_ms=100
    )
    assert (put.topic, put.queue_id, put.reconsume_times) == (*where, 1)
    p = props.decode_properties(put.properties)
    assert p[props.RETRY_TOPIC] == "orders"
    if delay_ms == 0:
        assert props.REAL_TOPIC not in p
        assert props.TIMER_OUT_MS not in p
    else:
        assert (p[props.REAL_TOPIC], p[props.TIMER_OUT_MS]) == ("%RETRY%g", "105")


def test_a_retry_of_a_retry_keeps_its_origin() -> None:
    again = stored(
        "%RETRY%g",
        {props.RETRY_TOPIC: "orders", props.ORIGIN_MESSAGE_ID: "first"},
        reconsume_times=2,
    )
    put = send_back_request(
        again, group="g", decision=RetryDecision.retry(3), queue_id=0, levels=LEVELS, now_ms=5
    )
    p = props.decode_properties(put.properties)
    assert (p[props.RETRY_TOPIC], p[props.ORIGIN_MESSAGE_ID]) == ("orders", "first")
    assert put.reconsume_times == 3


@pytest.mark.parametrize("reason", list(DeadLetterReason))
def test_a_dead_letter_names_its_origin_time_and_reason(reason: DeadLetterReason) -> None:
    original = stored(
        "%RETRY%g",
        {
            props.RETRY_TOPIC: "orders",
            props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "u",
            props.DELAY_TIME_LEVEL: "3",
        },
        reconsume_times=16,
    )
    decision = RetryDecision.dead(reason)
    put = send_back_request(
        original, group="g", decision=decision, queue_id=0, levels=LEVELS, now_ms=123
    )
    assert (put.topic, put.queue_id, put.reconsume_times) == ("%DLQ%g", 0, 17)
    p = props.decode_properties(put.properties)
    assert p[props.DELAY_TIME_LEVEL] == "0"
    assert p[props.DLQ_ORIGIN_TOPIC] == "orders"
    assert p[props.DLQ_ORIGIN_MESSAGE_ID] == "u"
    assert p[props.DLQ_TIME_MS] == "123"
    assert p[props.DLQ_REASON] == reason.value
    assert props.REAL_TOPIC not in p


def test_a_dead_letter_without_a_producer_id_names_the_offset_id() -> None:
    properties: dict[str, str] = {}
    mark_dead_letter(
        properties,
        origin_topic="orders",
        origin_message_id="0A",
        reason=DeadLetterReason.MAX_RECONSUME_TIMES,
        now_ms=1,
    )
    assert properties[props.DLQ_ORIGIN_MESSAGE_ID] == "0A"
    plain = stored("orders", {})
    decision = RetryDecision.dead(DeadLetterReason.CONSUMER_REQUESTED)
    put = send_back_request(
        plain, group="g", decision=decision, queue_id=0, levels=LEVELS, now_ms=1
    )
    p = decode_record(record_of(stored("%DLQ%g", props.decode_properties(put.properties))))
    assert p.properties[props.DLQ_ORIGIN_MESSAGE_ID] == offset_msg_id(STORE_HOST, 4096)
