"""Topic and consumer-group names: the naming rules and the retry topology's topic names.

These are pure functions shared by the broker (which routes retries), the client (which
subscribes to its group's retry topic and falls back to sending there) and the operator.
"""

from __future__ import annotations

import re

from reconsume.errors import InvalidNameError

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
DEFAULT_TOPIC = "TBW102"
"""The topic RocketMQ clients name as the template for auto-created topics."""

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
MANAGED_GROUP_MAX_LENGTH = TOPIC_MAX_LENGTH - len(RETRY_GROUP_TOPIC_PREFIX)
"""Longest group whose ``%RETRY%<group>`` is itself a valid topic name (120 characters): the
limit for groups whose retry topics are created through the admin API (ConsumerGroup
resources), since brokers refuse to create topics with longer names."""
NAME_PATTERN = r"^[%|a-zA-Z0-9_-]+$"
"""RocketMQ's pattern for topic and group names (the CRDs use it too)."""
_VALID = re.compile(NAME_PATTERN)


def _validate(kind: str, name: str, max_length: int) -> str:
    if not name:
        raise InvalidNameError(f"{kind} name is empty")
    if len(name) > max_length:
        raise InvalidNameError(
            f"{kind} name {name[:40]!r}... is {len(name)} characters; at most {max_length}"
        )
    if not _VALID.fullmatch(name):
        raise InvalidNameError(
            f"{kind} name {name!r} may contain only letters, digits, '%', '|', '_' and '-'"
        )
    return name


def validate_topic(name: str) -> str:
    """Return ``name`` if it is a valid topic name, else raise InvalidNameError."""
    return _validate("topic", name, TOPIC_MAX_LENGTH)


def validate_group(name: str) -> str:
    """Return ``name`` if it is a valid consumer-group name, else raise InvalidNameError."""
    return _validate("consumer group", name, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    """The retry topic of a consumer group: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dead_letter_topic(group: str) -> str:
    """The dead-letter topic of a consumer group: ``%DLQ%<group>``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def dead_letter_job_group(group: str) -> str:
    """The consumer group whose committed offsets on ``%DLQ%<group>`` mark the dead letters
    that dead-letter jobs have handled (drained, reprocessed or purged): ``%DLQ%<group>``.

    A group of its own rather than ``group``, so that the group's consumer progress (what
    ``mqadmin consumerProgress`` and lag alerts show) never includes its dead letters. The
    dead-letter depth is what lies past these offsets."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dead_letter_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def group_of(topic: str) -> str | None:
    """The consumer group a retry or dead-letter topic belongs to, else None."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return None


def is_system_topic(topic: str) -> bool:
    """Topics the broker runs on its own behalf (not created or deleted by users)."""
    return topic in (SCHEDULE_TOPIC, TIMER_TOPIC, DEFAULT_TOPIC) or topic.startswith("rmq_sys_")
