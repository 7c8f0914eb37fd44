"""Topic and subscription-group configs in RocketMQ's JSON shape.

Brokers persist these, the admin protocol carries them and the operator compares them, so
they live here, in the lowest layer. ``to_dict``/``from_dict`` use RocketMQ's field names
(``readQueueNums``, ``retryMaxTimes``, ``groupRetryPolicy`` ...) so RocketMQ's tools read them.

A group's consume type is one of its ``attributes`` (RocketMQ 5's map of a group's extra
settings), ``consume.type``: ``PULL`` (RocketMQ 4.x consumers only: pulls and offset commits),
``POP`` (RocketMQ 5 clients over gRPC only) or, absent, ``ANY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconsume.errors import InvalidArgumentError

PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4
PERM_READ_WRITE = PERM_READ | PERM_WRITE


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def perm_to_string(perm: int) -> str:
    """RocketMQ's ``PermName.perm2String``: ``RWX`` with ``-`` for a missing bit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def _int(data: Mapping[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from exc


def _attributes(data: Mapping[str, Any]) -> dict[str, str]:
    value = data.get("attributes") or {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"attributes must be an object, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


CONSUME_TYPE = "consume.type"
"""The subscription-group attribute naming which clients may consume the group."""
CONSUME_ANY = "ANY"
CONSUME_PULL = "PULL"
CONSUME_POP = "POP"
CONSUME_TYPES = (CONSUME_ANY, CONSUME_PULL, CONSUME_POP)


def consume_type_value(attributes: Mapping[str, str]) -> str | None:
    """The ``consume.type`` attribute as stored: under its name, or as RocketMQ 5's mqadmin
    writes an added attribute, ``+consume.type``; None when absent."""
    value = attributes.get(CONSUME_TYPE)
    return attributes.get("+" + CONSUME_TYPE) if value is None else value


def parse_consume_type(value: str | None) -> str:
    """One of :data:`CONSUME_TYPES` (any case; None is ANY); raises InvalidArgumentError."""
    if value is None:
        return CONSUME_ANY
    upper = value.strip().upper()
    if upper not in CONSUME_TYPES:
        raise InvalidArgumentError(
            f"attribute {CONSUME_TYPE} {value!r} is not one of {', '.join(CONSUME_TYPES)}"
        )
    return upper


def _bool(data: Mapping[str, Any], name: str, default: bool) -> bool:
    value = data.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidArgumentError(f"{name} must be a boolean, got {value!r}")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic on one broker: queue counts, permission, ordering."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("read_queue_nums", "write_queue_nums"):
            if not 0 <= getattr(self, name) <= 1024:
                raise InvalidArgumentError(
                    f"topic {self.topic_name}: {name} {getattr(self, name)} is outside 0-1024"
                )
        if not 0 <= self.perm <= 7:
            raise InvalidArgumentError(f"topic {self.topic_name}: perm {self.perm} is not 0-7")

    @property
    def queue_nums(self) -> int:
        """Queues that exist for reading or writing (the larger of the two counts)."""
        return max(self.read_queue_nums, self.write_queue_nums)

    def with_changes(self, **changes: Any) -> TopicConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicConfig:
        name = data.get("topicName")
        if not isinstance(name, str):
            raise InvalidArgumentError("topicName is missing")
        return cls(
            topic_name=name,
            read_queue_nums=_int(data, "readQueueNums", 16),
            write_queue_nums=_int(data, "writeQueueNums", 16),
            perm=_int(data, "perm", PERM_READ_WRITE),
            topic_filter_type=str(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=_int(data, "topicSysFlag", 0),
            order=_bool(data, "order", False),
            attributes=_attributes(data),
        )


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """A consumer group on one broker: consumption switches and its retry settings.

    ``group_retry_policy`` keeps RocketMQ 5's ``groupRetryPolicy`` JSON object as given; the
    retry engine interprets it. ``attributes`` are kept as given too; :attr:`consume_type`
    reads one of them.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: Mapping[str, Any] | None = None
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: Mapping[str, str] = field(default_factory=dict)

    def with_changes(self, **changes: Any) -> SubscriptionGroupConfig:
        return replace(self, **changes)

    @property
    def consume_type(self) -> str:
        """``ANY``, ``PULL`` or ``POP``: which clients may consume the group. A value no type
        names (brokers refuse to store one) counts as ANY."""
        try:
            return parse_consume_type(consume_type_value(self.attributes))
        except InvalidArgumentError:
            return CONSUME_ANY

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "groupSysFlag": self.group_sys_flag,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "attributes": dict(self.attributes),
        }
        if self.group_retry_policy is not None:
            data["groupRetryPolicy"] = dict(self.group_retry_policy)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SubscriptionGroupConfig:
        name = data.get("groupName")
        if not isinstance(name, str):
            raise InvalidArgumentError("groupName is missing")
        policy = data.get("groupRetryPolicy")
        if policy is not None and not isinstance(policy, Mapping):
            raise InvalidArgumentError(f"groupRetryPolicy must be an object, got {policy!r}")
        return cls(
            group_name=name,
            consume_enable=_bool(data, "consumeEnable", True),
            consume_from_min_enable=_bool(data, "consumeFromMinEnable", True),
            consume_broadcast_enable=_bool(data, "consumeBroadcastEnable", True),
            consume_message_orderly=_bool(data, "consumeMessageOrderly", False),
            retry_queue_nums=_int(data, "retryQueueNums", 1),
            retry_max_times=_int(data, "retryMaxTimes", 16),
            group_retry_policy=dict(policy) if policy is not None else None,
            broker_id=_int(data, "brokerId", 0),
            which_broker_when_consume_slowly=_int(data, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=_bool(data, "notifyConsumerIdsChangedEnable", True),
            group_sys_flag=_int(data, "groupSysFlag", 0),
            consume_timeout_minute=_int(data, "consumeTimeoutMinute", 15),
            attributes=_attributes(data),
        )
