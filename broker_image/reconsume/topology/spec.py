"""Desired state from the specs of ConsumerGroup and Topic resources.

The same defaults and bounds as the CRDs (``crds/``), so a spec that did not pass through an API
server (embedded mode, tests) means the same thing; an invalid spec raises :class:`SpecError`
naming the field (``spec.retry.policy.delays[1]: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import parse_duration_ms
from reconsume.topology.model import (
    DEFAULT_RETRY_MAX_TIMES,
    DEFAULT_RETRY_QUEUE_NUMS,
    DEFAULT_TOPIC_QUEUES,
    INT32_MAX,
    MAX_CUSTOMIZED_DELAYS,
    MAX_MULTIPLIER,
    MAX_RETRY_QUEUE_NUMS,
    MAX_TOPIC_QUEUES,
    ConsumeType,
    CustomizedPolicy,
    DelayLevelsPolicy,
    DeletionPolicy,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    MessageModel,
    Permission,
    RetryPolicy,
)

E = TypeVar("E", bound=StrEnum)


class SpecError(InvalidArgumentError):
    """A resource spec that does not describe a valid group or topic; the message starts with
    the field's path."""


class _Fields:
    """Typed reads of one object of a spec, with the path for error messages."""

    def __init__(self, data: object, where: str) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise SpecError(f"{where}: expected an object, got {data!r}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def path(self, key: str) -> str:
        return f"{self.where}.{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{self.path(key)}: expected an integer, got {value!r}")
        if not low <= value <= high:
            raise SpecError(f"{self.path(key)}: {value} is outside {low}..{high}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(f"{self.path(key)}: expected true or false, got {value!r}")
        return value

    def string(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{self.path(key)}: expected a string, got {value!r}")
        return value

    def choice(self, key: str, enum: type[E], default: E) -> E:
        value = self.data.get(key, default.value)
        try:
            return enum(value)
        except ValueError:
            allowed = ", ".join(member.value for member in enum)
            raise SpecError(f"{self.path(key)}: {value!r} is not one of {allowed}") from None

    def duration_ms(self, key: str) -> int:
        value = self.string(key)
        if value is None:
            raise SpecError(f"{self.path(key)}: required")
        return _duration(value, self.path(key))

    def child(self, key: str) -> _Fields:
        return _Fields(self.data.get(key), self.path(key))

    def items(self, key: str, limit: int) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise SpecError(f"{self.path(key)}: expected a list, got {value!r}")
        if len(value) > limit:
            raise SpecError(f"{self.path(key)}: at most {limit} items, got {len(value)}")
        return value


def _duration(value: str, where: str) -> int:
    try:
        return parse_duration_ms(value, where)
    except InvalidArgumentError as exc:
        raise SpecError(str(exc)) from None


def _name(spec: _Fields, key: str, metadata_name: str | None) -> tuple[str, str]:
    """The declared name and its path: ``spec.<key>``, else ``metadata.name``."""
    value = spec.string(key)
    if value is not None:
        return value, spec.path(key)
    if not metadata_name:
        raise SpecError(f"{spec.path(key)}: required when metadata.name is absent")
    return metadata_name, "metadata.name"


class _PolicyType(StrEnum):
    DELAY_LEVELS = "DelayLevels"
    CUSTOMIZED = "Customized"
    EXPONENTIAL = "Exponential"


def _policy_from_spec(policy: _Fields) -> RetryPolicy:
    """``spec.retry.policy`` as a retry policy."""
    kind = policy.choice("type", _PolicyType, _PolicyType.DELAY_LEVELS)
    exponential = [key for key in ("initial", "max", "multiplier") if policy.has(key)]
    if kind is not _PolicyType.CUSTOMIZED and policy.has("delays"):
        raise SpecError(f"{policy.path('delays')}: applies only to type Customized")
    if kind is not _PolicyType.EXPONENTIAL and exponential:
        raise SpecError(f"{policy.path(exponential[0])}: applies only to type Exponential")
    if kind is _PolicyType.CUSTOMIZED:
        delays = policy.items("delays", MAX_CUSTOMIZED_DELAYS)
        if not delays:
            raise SpecError(f"{policy.path('delays')}: required when type is Customized")
        where = policy.path("delays")
        return CustomizedPolicy(
            tuple(_duration(str(delay), f"{where}[{i}]") for i, delay in enumerate(delays))
        )
    if kind is _PolicyType.EXPONENTIAL:
        initial = policy.duration_ms("initial")
        maximum = policy.duration_ms("max")
        if maximum < initial:
            raise SpecError(f"{policy.path('max')}: must not be shorter than initial")
        if not policy.has("multiplier"):
            raise SpecError(f"{policy.path('multiplier')}: required when type is Exponential")
        multiplier = policy.integer("multiplier", 2, 1, MAX_MULTIPLIER)
        return ExponentialPolicy(initial, maximum, multiplier)
    return DelayLevelsPolicy()


def group_from_spec(spec: Mapping[str, Any], metadata_name: str | None = None) -> DesiredGroup:
    """A ConsumerGroup's ``spec`` (``metadata.name`` is the group name when ``groupName`` is
    absent) as a desired group."""
    fields = _Fields(spec, "spec")
    name, name_path = _name(fields, "groupName", metadata_name)
    retry = fields.child("retry")
    subscriptions = []
    for index, item in enumerate(fields.items("subscriptions", 64)):
        topic = _Fields(item, f"spec.subscriptions[{index}]").string("topic")
        if topic is None:
            raise SpecError(f"spec.subscriptions[{index}].topic: required")
        subscriptions.append(topic)
    values: dict[str, Any] = {
        "retry_queue_nums": retry.integer(
            "queueNums", DEFAULT_RETRY_QUEUE_NUMS, 0, MAX_RETRY_QUEUE_NUMS
        ),
        "retry_max_times": retry.integer("maxTimes", DEFAULT_RETRY_MAX_TIMES, -1, INT32_MAX),
        "retry_policy": _policy_from_spec(retry.child("policy")),
        "message_model": fields.choice("messageModel", MessageModel, MessageModel.CLUSTERING),
        "orderly": fields.boolean("orderly", False),
        "consume_enable": fields.boolean("consumeEnable", True),
        "dead_letter_readable": fields.child("deadLetter").boolean("readable", True),
        "consume_type": fields.choice("consumeType", ConsumeType, ConsumeType.ANY),
        "subscriptions": tuple(subscriptions),
        "deletion_policy": fields.choice("deletionPolicy", DeletionPolicy, DeletionPolicy.RETAIN),
    }
    try:
        return DesiredGroup(name, **values)
    except InvalidArgumentError as exc:
        raise SpecError(f"{name_path}: {exc}") from None


def topic_from_spec(spec: Mapping[str, Any], metadata_name: str | None = None) -> DesiredTopic:
    """A Topic's ``spec`` (``metadata.name`` is the topic name when ``topicName`` is absent) as
    a desired topic."""
    fields = _Fields(spec, "spec")
    name, name_path = _name(fields, "topicName", metadata_name)
    queues = fields.integer("queues", DEFAULT_TOPIC_QUEUES, 1, MAX_TOPIC_QUEUES)
    permission = fields.choice("perm", Permission, Permission.READ_WRITE)
    order = fields.boolean("order", False)
    deletion = fields.choice("deletionPolicy", DeletionPolicy, DeletionPolicy.RETAIN)
    try:
        return DesiredTopic(name, queues, permission, order, deletion)
    except InvalidArgumentError as exc:
        raise SpecError(f"{name_path}: {exc}") from None


def group_from_resource(resource: Mapping[str, Any]) -> DesiredGroup:
    """A whole ConsumerGroup object (``metadata`` and ``spec``) as a desired group."""
    metadata = _Fields(resource.get("metadata"), "metadata")
    return group_from_spec(resource.get("spec") or {}, metadata.string("name"))


def topic_from_resource(resource: Mapping[str, Any]) -> DesiredTopic:
    """A whole Topic object as a desired topic."""
    metadata = _Fields(resource.get("metadata"), "metadata")
    return topic_from_spec(resource.get("spec") or {}, metadata.string("name"))
