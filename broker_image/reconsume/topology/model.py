"""Desired state: what a ConsumerGroup or Topic resource asks every broker of a cluster for.

Typed, immutable and independent of Kubernetes: :mod:`reconsume.topology.spec` builds these
from resource specs, :func:`reconsume.topology.plan.plan` compares them with what the brokers
report. A group's retry policy maps onto RocketMQ 5's ``groupRetryPolicy`` JSON, which the
broker's retry engine reads (delays in milliseconds)::

    {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 60000]}}
    {"type": "EXPONENTIAL",
     "exponentialRetryPolicy": {"initial": 5000, "max": 7200000, "multiplier": 2}}

No policy object stands for the broker's delay levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconsume.errors import InvalidArgumentError, InvalidNameError
from reconsume.message.configs import (
    CONSUME_TYPE,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    SubscriptionGroupConfig,
    TopicConfig,
    consume_type_value,
)
from reconsume.message.names import (
    MANAGED_GROUP_MAX_LENGTH,
    dead_letter_topic,
    group_of,
    is_system_topic,
    retry_topic,
    validate_group,
    validate_topic,
)

DEFAULT_RETRY_QUEUE_NUMS = 1
DEFAULT_RETRY_MAX_TIMES = 16
MAX_RETRY_QUEUE_NUMS = 64
DEFAULT_TOPIC_QUEUES = 8
MAX_TOPIC_QUEUES = 1024
MAX_CUSTOMIZED_DELAYS = 1000
MAX_MULTIPLIER = 100
INT32_MAX = 2**31 - 1
# The retry engine's defaults for an exponential policy object missing a field.
_EXPONENTIAL_DEFAULTS = {"initial": 5_000, "max": 7_200_000, "multiplier": 2}


class Kind(StrEnum):
    GROUP = "group"
    TOPIC = "topic"


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class MessageModel(StrEnum):
    CLUSTERING = "Clustering"
    BROADCASTING = "Broadcasting"


class ConsumeType(StrEnum):
    """Which clients may consume a group: both kinds, RocketMQ 4.x consumers (pulls and
    offset commits) or RocketMQ 5 clients over gRPC (pop)."""

    ANY = "Any"
    PULL = "Pull"
    POP = "Pop"

    @property
    def attribute(self) -> str | None:
        """The group's ``consume.type`` attribute; None (no attribute) for Any."""
        return None if self is ConsumeType.ANY else self.value.upper()


def with_consume_type(attributes: Mapping[str, str], kind: ConsumeType) -> dict[str, str]:
    """``attributes`` with ``consume.type`` (either spelling) replaced by ``kind``'s."""
    kept = {k: v for k, v in attributes.items() if k not in (CONSUME_TYPE, "+" + CONSUME_TYPE)}
    if kind.attribute is not None:
        kept[CONSUME_TYPE] = kind.attribute
    return kept


class Permission(StrEnum):
    READ_WRITE = "ReadWrite"
    READ_ONLY = "ReadOnly"
    WRITE_ONLY = "WriteOnly"

    @property
    def bits(self) -> int:
        return {"ReadWrite": PERM_READ_WRITE, "ReadOnly": PERM_READ, "WriteOnly": PERM_WRITE}[
            self.value
        ]


# ---------------------------------------------------------------------- retry policies
@dataclass(frozen=True, slots=True)
class DelayLevelsPolicy:
    """Retry ``r`` waits the broker's delay level ``3 + r`` (no ``groupRetryPolicy``)."""


@dataclass(frozen=True, slots=True)
class CustomizedPolicy:
    """Retry ``r`` waits ``delays_ms[r]``; the last delay repeats."""

    delays_ms: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.delays_ms) <= MAX_CUSTOMIZED_DELAYS:
            raise InvalidArgumentError(
                f"a customized policy needs 1-{MAX_CUSTOMIZED_DELAYS} delays"
            )
        if any(delay <= 0 for delay in self.delays_ms):
            raise InvalidArgumentError("a customized policy's delays must be positive")


@dataclass(frozen=True, slots=True)
class ExponentialPolicy:
    """Retry ``r`` waits ``min(max_ms, initial_ms * multiplier ** r)``."""

    initial_ms: int
    max_ms: int
    multiplier: int

    def __post_init__(self) -> None:
        if self.initial_ms <= 0 or self.max_ms < self.initial_ms:
            raise InvalidArgumentError("an exponential policy needs 0 < initial <= max")
        if self.multiplier < 1:
            raise InvalidArgumentError("an exponential policy's multiplier must be at least 1")


@dataclass(frozen=True, slots=True)
class UnknownPolicy:
    """A ``groupRetryPolicy`` a broker reports that no policy here describes (it never equals
    a desired policy, so the plan replaces it)."""

    document: str


RetryPolicy = DelayLevelsPolicy | CustomizedPolicy | ExponentialPolicy


def policy_to_json(policy: RetryPolicy) -> dict[str, Any] | None:
    """The ``groupRetryPolicy`` object for ``policy``; None for the delay levels."""
    if isinstance(policy, CustomizedPolicy):
        return {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": list(policy.delays_ms)}}
    if isinstance(policy, ExponentialPolicy):
        return {
            "type": "EXPONENTIAL",
            "exponentialRetryPolicy": {
                "initial": policy.initial_ms,
                "max": policy.max_ms,
                "multiplier": policy.multiplier,
            },
        }
    return None


def policy_from_json(document: Mapping[str, Any] | None) -> RetryPolicy | UnknownPolicy:
    """What a broker's ``groupRetryPolicy`` means, read as the retry engine reads it: no object,
    or one without the part its ``type`` selects, means the delay levels."""
    if document is None:
        return DelayLevelsPolicy()
    kind = document.get("type")
    if kind is None:
        kind = "CUSTOMIZED"  # RocketMQ's default type
    try:
        if kind == "CUSTOMIZED":
            body = document.get("customizedRetryPolicy")
            if body is None or body.get("next") is None:
                return DelayLevelsPolicy()
            return CustomizedPolicy(tuple(_positive(v) for v in body["next"]))
        if kind == "EXPONENTIAL":
            body = document.get("exponentialRetryPolicy")
            if body is None:
                return DelayLevelsPolicy()
            values = {
                name: _positive(default if body.get(name) is None else body[name])
                for name, default in _EXPONENTIAL_DEFAULTS.items()
            }
            return ExponentialPolicy(values["initial"], values["max"], values["multiplier"])
    except (AttributeError, TypeError, InvalidArgumentError):
        pass
    return UnknownPolicy(repr(dict(document)))


def _positive(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"expected a positive integer, got {value!r}")
    return value


# ---------------------------------------------------------------------- groups and topics
@dataclass(frozen=True, slots=True)
class DesiredGroup:
    """A consumer group's config and its retry and dead-letter topics, on every broker."""

    name: str
    retry_queue_nums: int = DEFAULT_RETRY_QUEUE_NUMS
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    retry_policy: RetryPolicy = field(default_factory=DelayLevelsPolicy)
    message_model: MessageModel = MessageModel.CLUSTERING
    orderly: bool = False
    consume_enable: bool = True
    dead_letter_readable: bool = True
    consume_type: ConsumeType = ConsumeType.ANY
    subscriptions: tuple[str, ...] = ()
    """Topics the group's consumers subscribe to (checked to exist, not configured)."""
    deletion_policy: DeletionPolicy = DeletionPolicy.RETAIN

    def __post_init__(self) -> None:
        validate_group(self.name)
        if len(self.name) > MANAGED_GROUP_MAX_LENGTH:
            raise InvalidNameError(
                f"consumer group name {self.name[:40]!r}... is {len(self.name)} characters; at "
                f"most {MANAGED_GROUP_MAX_LENGTH} so that its retry topic is a valid topic name"
            )
        if not 0 <= self.retry_queue_nums <= MAX_RETRY_QUEUE_NUMS:
            raise InvalidArgumentError(
                f"group {self.name}: retryQueueNums {self.retry_queue_nums} is outside "
                f"0-{MAX_RETRY_QUEUE_NUMS}"
            )
        if not -1 <= self.retry_max_times <= INT32_MAX:
            raise InvalidArgumentError(
                f"group {self.name}: retryMaxTimes {self.retry_max_times} is outside "
                f"-1..{INT32_MAX}"
            )
        for topic in self.subscriptions:
            validate_topic(topic)

    @property
    def broadcast(self) -> bool:
        return self.message_model is MessageModel.BROADCASTING

    @property
    def retry_topic(self) -> str | None:
        """``%RETRY%<group>``; None for a broadcasting group, which never retries."""
        return None if self.broadcast else retry_topic(self.name)

    @property
    def dead_letter_topic(self) -> str | None:
        """``%DLQ%<group>``; None for a broadcasting group, which never dead-letters."""
        return None if self.broadcast else dead_letter_topic(self.name)

    @property
    def dead_letter_perm(self) -> int:
        return PERM_READ_WRITE if self.dead_letter_readable else PERM_WRITE

    @property
    def group_retry_policy(self) -> dict[str, Any] | None:
        return policy_to_json(self.retry_policy)

    def config(self, current: SubscriptionGroupConfig | None = None) -> SubscriptionGroupConfig:
        """The config to store: ``current`` (fields this group does not manage kept, other
        attributes too) or the defaults, with every managed field as desired."""
        base = current if current is not None else SubscriptionGroupConfig(self.name)
        return base.with_changes(
            consume_enable=self.consume_enable,
            consume_broadcast_enable=self.broadcast,
            consume_message_orderly=self.orderly,
            retry_queue_nums=self.retry_queue_nums,
            retry_max_times=self.retry_max_times,
            group_retry_policy=self.group_retry_policy,
            attributes=with_consume_type(base.attributes, self.consume_type),
        )

    def differences(self, current: SubscriptionGroupConfig) -> list[str]:
        """What ``current`` has that this group does not want, one phrase per field."""
        pairs: list[tuple[str, object, object]] = [
            ("consumeEnable", current.consume_enable, self.consume_enable),
            ("consumeBroadcastEnable", current.consume_broadcast_enable, self.broadcast),
            ("consumeMessageOrderly", current.consume_message_orderly, self.orderly),
            ("retryQueueNums", current.retry_queue_nums, self.retry_queue_nums),
            ("retryMaxTimes", current.retry_max_times, self.retry_max_times),
            (
                "groupRetryPolicy",
                policy_from_json(current.group_retry_policy),
                self.retry_policy,
            ),
        ]
        found = [f"{name} {have} -> {want}" for name, have, want in pairs if have != want]
        if with_consume_type(current.attributes, self.consume_type) != current.attributes:
            have = consume_type_value(current.attributes)
            if have is not None and CONSUME_TYPE not in current.attributes:
                have = f"{have} (as +{CONSUME_TYPE})"
            want = self.consume_type.attribute
            found.append(f"{CONSUME_TYPE} {have or 'absent'} -> {want or 'absent'}")
        return found

    def removal(self, *, force: bool = False) -> Removal | None:
        """What deleting the resource asks for: None under the Retain policy."""
        if self.deletion_policy is DeletionPolicy.RETAIN:
            return None
        return Removal(Kind.GROUP, self.name, force)


@dataclass(frozen=True, slots=True)
class DesiredTopic:
    """A business topic: the same queues, permission and order flag on every broker."""

    name: str
    queues: int = DEFAULT_TOPIC_QUEUES
    permission: Permission = Permission.READ_WRITE
    order: bool = False
    deletion_policy: DeletionPolicy = DeletionPolicy.RETAIN

    def __post_init__(self) -> None:
        _check_business_topic(self.name)
        if not 0 < self.queues <= MAX_TOPIC_QUEUES:
            raise InvalidArgumentError(
                f"topic {self.name}: queues {self.queues} is outside 1-{MAX_TOPIC_QUEUES}"
            )

    def config(self) -> TopicConfig:
        return TopicConfig(
            topic_name=self.name,
            read_queue_nums=self.queues,
            write_queue_nums=self.queues,
            perm=self.permission.bits,
            order=self.order,
        )

    def differences(self, current: TopicConfig) -> list[str]:
        pairs: list[tuple[str, object, object]] = [
            ("readQueueNums", current.read_queue_nums, self.queues),
            ("writeQueueNums", current.write_queue_nums, self.queues),
            ("perm", current.perm, self.permission.bits),
            ("order", current.order, self.order),
        ]
        return [f"{name} {have} -> {want}" for name, have, want in pairs if have != want]

    def removal(self, *, force: bool = False) -> Removal | None:
        if self.deletion_policy is DeletionPolicy.RETAIN:
            return None
        return Removal(Kind.TOPIC, self.name, force)


def _check_business_topic(name: str) -> None:
    validate_topic(name)
    if group_of(name) is not None or is_system_topic(name):
        raise InvalidNameError(
            f"topic {name} is a retry, dead-letter or system topic, not a business topic"
        )


@dataclass(frozen=True, slots=True)
class Removal:
    """Remove a group (its config, offsets, retry and dead-letter topics) or a topic from every
    broker; refused while the dead-letter topic (the topic) holds messages, unless forced."""

    kind: Kind
    name: str
    force: bool = False

    def __post_init__(self) -> None:
        if self.kind is Kind.GROUP:
            validate_group(self.name)
        else:
            _check_business_topic(self.name)


@dataclass(frozen=True, slots=True)
class Desired:
    """Everything one reconcile asks of a cluster."""

    groups: tuple[DesiredGroup, ...] = ()
    topics: tuple[DesiredTopic, ...] = ()
    removals: tuple[Removal, ...] = ()

    def __post_init__(self) -> None:
        claimed: set[tuple[Kind, str]] = set()
        keys = [(Kind.GROUP, g.name) for g in self.groups]
        keys += [(Kind.TOPIC, t.name) for t in self.topics]
        keys += [(r.kind, r.name) for r in self.removals]
        for key in keys:
            if key in claimed:
                raise InvalidArgumentError(f"{key[0]} {key[1]} is declared more than once")
            claimed.add(key)
