"""How a delayed message is stored and how it comes back out.

Stored: a message with a delay level (the DELAY property > 0) goes to queue ``level - 1`` of
``SCHEDULE_TOPIC_XXXX``, with its real topic and queue kept in REAL_TOPIC / REAL_QID and a
level above the last clamped to the last (RocketMQ's ``CommitLog.putMessage``). Its
consume-queue entry's tag code is the due time, store time + the level's delay
(:func:`schedule_tags_code`, the store's tag-code hook, so recovery recomputes it).

Delivered: :func:`restore` turns the stored record back into a put for the real topic and
queue, DELAY cleared, reconsume times and every other property kept, plus SCHEDULE_ORIGIN
naming the schedule record (see :mod:`reconsume.engine.redelivery`). A timer wheel can
reuse the delivery half: anything due becomes a :class:`PutRequest` for the same appender.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from reconsume.engine.delays import DelayLevels, schedule_queue_id
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.decode import decode_record
from reconsume.message.names import SCHEDULE_TOPIC, TIMER_TOPIC
from reconsume.store.requests import PutRequest, TagsCode, default_tags_code

_DELAY_NEEDLE = props.DELAY_TIME_LEVEL


def delay_level_of(value: str | None) -> int:
    """The delay level a DELAY property value asks for; 0 (not delayed) when absent or not
    an integer."""
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def to_schedule(
    properties: MutableMapping[str, str], topic: str, queue_id: int, levels: DelayLevels
) -> tuple[str, int]:
    """Where a message with these properties is stored: the schedule topic's queue of its
    delay level (REAL_TOPIC, REAL_QID and the clamped DELAY written into ``properties``), or
    ``(topic, queue_id)`` unchanged when it is not delayed."""
    level = delay_level_of(properties.get(props.DELAY_TIME_LEVEL))
    if level <= 0:
        return topic, queue_id
    level = levels.clamp(level)
    properties[props.DELAY_TIME_LEVEL] = str(level)
    properties[props.REAL_TOPIC] = topic
    properties[props.REAL_QUEUE_ID] = str(queue_id)
    return SCHEDULE_TOPIC, schedule_queue_id(level)


def schedule_tags_code(levels: DelayLevels) -> TagsCode:
    """The store's tag-code hook: the due time for schedule-topic records, the TAGS hash code
    for every other record."""

    def tags_code(topic: str, properties: str, store_timestamp_ms: int) -> int:
        if topic != SCHEDULE_TOPIC:
            return default_tags_code(topic, properties, store_timestamp_ms)
        level = delay_level_of(props.find_property(properties, _DELAY_NEEDLE))
        if level <= 0:
            return default_tags_code(topic, properties, store_timestamp_ms)
        return levels.due_ms(level, store_timestamp_ms)

    return tags_code


def correct_due_ms(due_ms: int, now_ms: int, delay_ms: int) -> int:
    """A due time further away than the level's whole delay means the clock went back since
    the message was stored; deliver it now rather than wait (RocketMQ's
    ``correctDeliverTimestamp``)."""
    return now_ms if due_ms > now_ms + delay_ms else due_ms


def restore(record: bytes, schedule_offset: int) -> PutRequest:
    """The put that delivers the schedule-topic or timer-topic ``record`` stored at commit-log
    offset ``schedule_offset``; InvalidArgumentError when it names no valid real topic and queue."""
    message = decode_record(record)
    properties = message.properties
    topic = properties.get(props.REAL_TOPIC)
    queue = properties.get(props.REAL_QUEUE_ID, "")
    if not topic or topic in (SCHEDULE_TOPIC, TIMER_TOPIC) or not queue.isdigit():
        raise InvalidArgumentError(
            f"delayed record at {schedule_offset} has no valid REAL_TOPIC/REAL_QID "
            f"({topic!r}, {queue!r})"
        )
    properties.pop(props.DELAY_TIME_LEVEL, None)
    properties[props.SCHEDULE_ORIGIN] = str(schedule_offset)
    return PutRequest(
        topic=topic,
        queue_id=int(queue),
        body=message.body,
        properties=props.encode_properties(properties),
        flag=message.flag,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=message.born_host.packed(),
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )
