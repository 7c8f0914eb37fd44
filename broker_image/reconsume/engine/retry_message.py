"""The message a send-back stores: a retry for ``%RETRY%<group>`` or a dead letter.

What RocketMQ's ``consumerSendMsgBack`` builds from the original: same body, flag, properties,
sysFlag and born time/host; ``reconsumeTimes + 1``; RETRY_TOPIC set to the original's topic when
absent; ORIGIN_MESSAGE_ID kept, or set to the original's offset message id. A retry carries its
delay level (DELAY) and is stored in the schedule topic until due, or, when the group's policy chose
a delay in milliseconds, TIMER_OUT_MS and the timer topic; a retry due at once (a 5.x lease's
expiry: the invisible duration was the delay) is stored in ``%RETRY%<group>`` itself, as RocketMQ's
pop revive does. A dead letter additionally carries RocketMQ 5's DLQ_ORIGIN_TOPIC and
DLQ_ORIGIN_MESSAGE_ID and reconsume's dead-letter time and reason.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from reconsume.engine.delays import DelayLevels
from reconsume.engine.retry import DeadLetterReason, RetryDecision
from reconsume.engine.scheduled import to_schedule
from reconsume.engine.timer_message import to_timer
from reconsume.message import properties as props
from reconsume.message.model import StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.store.requests import PutRequest


def mark_dead_letter(
    properties: MutableMapping[str, str],
    *,
    origin_topic: str,
    origin_message_id: str,
    reason: DeadLetterReason,
    now_ms: int,
) -> None:
    """Add the dead-letter properties; a dead letter is never delayed (DELAY 0)."""
    properties[props.DELAY_TIME_LEVEL] = "0"
    properties[props.DLQ_ORIGIN_TOPIC] = origin_topic
    properties[props.DLQ_ORIGIN_MESSAGE_ID] = origin_message_id
    properties[props.DLQ_TIME_MS] = str(now_ms)
    properties[props.DLQ_REASON] = reason.value


def origin_topic(properties: MutableMapping[str, str], topic: str) -> str:
    """The topic the message was first sent to: RETRY_TOPIC when set, else ``topic``."""
    return properties.get(props.RETRY_TOPIC) or topic


def origin_message_id(properties: MutableMapping[str, str], fallback: str) -> str:
    """The id clients know the message by: the producer's UNIQ_KEY, else ORIGIN_MESSAGE_ID,
    else ``fallback`` (an offset message id)."""
    return (
        properties.get(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        or properties.get(props.ORIGIN_MESSAGE_ID)
        or fallback
    )


def send_back_request(
    original: StoredMessage,
    *,
    group: str,
    decision: RetryDecision,
    queue_id: int,
    levels: DelayLevels,
    now_ms: int,
) -> PutRequest:
    """The put that stores the retry (or dead letter) of ``original`` for ``group``: a retry
    goes to the schedule or timer topic on its way to queue ``queue_id`` of
    ``%RETRY%<group>``, or there directly when it is due at once."""
    properties = dict(original.properties)
    if props.RETRY_TOPIC not in properties:
        properties[props.RETRY_TOPIC] = original.topic
    if not properties.get(props.ORIGIN_MESSAGE_ID, "").strip():
        properties[props.ORIGIN_MESSAGE_ID] = original.msg_id
    if decision.dead_letter:
        topic = dead_letter_topic(group)
        mark_dead_letter(
            properties,
            origin_topic=origin_topic(properties, original.topic),
            origin_message_id=origin_message_id(properties, original.msg_id),
            reason=decision.reason or DeadLetterReason.MAX_RECONSUME_TIMES,
            now_ms=now_ms,
        )
    elif decision.delay_ms is not None and decision.delay_ms <= 0:
        topic = retry_topic(group)  # due now: a stop at the timer would only add its latency
    elif decision.delay_ms is not None:  # a per-group policy's delay: the timer wheel
        topic, queue_id = to_timer(
            properties, retry_topic(group), queue_id, now_ms + decision.delay_ms
        )
    else:
        properties[props.DELAY_TIME_LEVEL] = str(decision.delay_level)
        topic, queue_id = to_schedule(properties, retry_topic(group), queue_id, levels)
    return PutRequest(
        topic=topic,
        queue_id=queue_id,
        body=original.body,
        properties=props.encode_properties(properties),
        flag=original.flag,
        sys_flag=original.sys_flag,
        born_timestamp_ms=original.born_timestamp_ms,
        born_host=original.born_host.packed(),
        reconsume_times=original.reconsume_times + 1,
    )
