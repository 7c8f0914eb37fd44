"""How a message with an arbitrary delay is stored: the timer topic, its due time in the tag code.

A producer delays a message by any number of milliseconds with one of RocketMQ 5's
properties, read in RocketMQ's order of precedence: TIMER_DELAY_SEC (seconds from now),
TIMER_DELAY_MS (milliseconds from now), TIMER_DELIVER_MS (milliseconds since the epoch).
As in RocketMQ 5 (``HookUtils.handleScheduleMessage``):

* a delay level (DELAY > 0) wins: the timer properties are removed and the level applies;
* a message already carrying TIMER_OUT_MS was delivered by a timer once (a retry, a copy
  re-sent by a job) and is not delayed again;
* a value that is not an integer is refused (MESSAGE_ILLEGAL), so is a due time further ahead
  than the broker's longest timer delay (``timerMaxDelaySec``, 3 days by default);
* a due time not in the future means "deliver at once": the message is stored in its topic.

Otherwise it goes to queue 0 of ``rmq_sys_wheel_timer`` with REAL_TOPIC / REAL_QID and
TIMER_OUT_MS = the due time, to the millisecond (RocketMQ rounds it down to its 1 s
precision). The consume-queue tag code of a timer-topic entry is that due time
(:func:`timer_tags_code`, composed with the schedule topic's hook), so the timer service
rebuilds its index from the consume queue after a restart.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from reconsume.engine.delays import DelayLevels
from reconsume.engine.scheduled import delay_level_of, to_schedule
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.names import TIMER_TOPIC
from reconsume.store.requests import TagsCode

TIMER_QUEUE_ID = 0
"""The timer topic has one queue (RocketMQ's ``TimerMessageStore`` writes queue 0 too)."""
DEFAULT_MAX_DELAY_S = 3 * 24 * 3600
"""RocketMQ 5's ``timerMaxDelaySec``."""
TIMER_PROPERTIES = (props.TIMER_DELAY_SEC, props.TIMER_DELAY_MS, props.TIMER_DELIVER_MS)
"""The properties asking for a timer delay, in RocketMQ's order of precedence."""


def is_timer_message(properties: MutableMapping[str, str]) -> bool:
    """Whether the properties ask for a timer delay not applied yet."""
    if props.TIMER_OUT_MS in properties:
        return False
    return any(name in properties for name in TIMER_PROPERTIES)


def asks_for_delay(properties: MutableMapping[str, str]) -> bool:
    """Cheap test for the send path: a delay level or any timer property is present."""
    return props.DELAY_TIME_LEVEL in properties or any(
        name in properties for name in TIMER_PROPERTIES
    )


def timer_due_ms(properties: MutableMapping[str, str], now_ms: int) -> int:
    """The due time (ms since the epoch) the timer properties ask for; InvalidArgumentError
    naming the property when its value is not an integer."""
    for name, scale, relative in (
        (props.TIMER_DELAY_SEC, 1000, True),
        (props.TIMER_DELAY_MS, 1, True),
        (props.TIMER_DELIVER_MS, 1, False),
    ):
        value = properties.get(name)
        if value is None:
            continue
        try:
            amount = int(value)
        except ValueError:
            raise InvalidArgumentError(
                f"timer message illegal: {name} {value!r} is not an integer"
            ) from None
        return now_ms + amount * scale if relative else amount
    raise InvalidArgumentError("not a timer message")


def to_timer(
    properties: MutableMapping[str, str], topic: str, queue_id: int, due_ms: int
) -> tuple[str, int]:
    """Redirect a message to the timer topic, due at ``due_ms`` (REAL_TOPIC, REAL_QID and
    TIMER_OUT_MS written into ``properties``, any delay level removed)."""
    properties.pop(props.DELAY_TIME_LEVEL, None)
    properties[props.TIMER_OUT_MS] = str(due_ms)
    properties[props.REAL_TOPIC] = topic
    properties[props.REAL_QUEUE_ID] = str(queue_id)
    return TIMER_TOPIC, TIMER_QUEUE_ID


def route_delayed(
    properties: MutableMapping[str, str],
    topic: str,
    queue_id: int,
    levels: DelayLevels,
    *,
    now_ms: int,
    max_delay_ms: int,
) -> tuple[str, int]:
    """Where a sent message with these properties is stored: a schedule queue (delay level),
    the timer topic (timer properties, due in the future), or ``(topic, queue_id)``. Raises
    InvalidArgumentError for an illegal timer message (answered MESSAGE_ILLEGAL)."""
    if delay_level_of(properties.get(props.DELAY_TIME_LEVEL)) > 0:
        for name in TIMER_PROPERTIES:
            properties.pop(name, None)
        return to_schedule(properties, topic, queue_id, levels)
    if not is_timer_message(properties):
        return topic, queue_id
    due_ms = timer_due_ms(properties, now_ms)
    if due_ms <= now_ms:
        return topic, queue_id  # already due: delivered at once, as RocketMQ does
    if due_ms - now_ms > max_delay_ms:
        raise InvalidArgumentError(
            f"timer message illegal: the delay ({due_ms - now_ms} ms) is longer than the "
            f"broker's longest timer delay ({max_delay_ms} ms)"
        )
    return to_timer(properties, topic, queue_id, due_ms)


def timer_tags_code(inner: TagsCode) -> TagsCode:
    """The store's tag-code hook extended with the timer topic: its entries carry the due time
    (TIMER_OUT_MS; the store time when missing, i.e. due at once); every other record gets
    ``inner``'s code (the schedule topic's due time, the TAGS hash)."""

    def tags_code(topic: str, properties: str, store_timestamp_ms: int) -> int:
        if topic != TIMER_TOPIC:
            return inner(topic, properties, store_timestamp_ms)
        return due_of_properties(properties, store_timestamp_ms)

    return tags_code


def due_of_properties(properties: str, store_timestamp_ms: int) -> int:
    """A timer record's due time from its encoded properties."""
    value = props.find_property(properties, props.TIMER_OUT_MS)
    if value is not None and value.isdigit():
        return int(value)
    return store_timestamp_ms
