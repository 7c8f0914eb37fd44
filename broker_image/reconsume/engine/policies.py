"""Per-group retry policies: RocketMQ 5's ``groupRetryPolicy`` JSON, read as a RetryPolicy.

A subscription group's config may carry (RocketMQ 5's field names; delays in milliseconds)::

    {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000, 60000]}}
    {"type": "EXPONENTIAL",
     "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2}}

* no ``groupRetryPolicy``, or one without the object its ``type`` selects: the broker's delay
  levels (:class:`~reconsume.engine.retry.DelayLevelPolicy`, ``3 + reconsumeTimes``) — what
  RocketMQ 5's default policy amounts to with the default levels;
* ``CUSTOMIZED``: retry ``r`` (the failed message's reconsume times, 0 for the first failure)
  waits ``next[r]``; past the end of the list the last delay repeats;
* ``EXPONENTIAL``: retry ``r`` waits ``min(max, initial * multiplier ** min(r, 32))``
  (RocketMQ's defaults: initial 5000, max 7200000, multiplier 2).

Both answer with a delay in milliseconds, scheduled on the timer wheel, capped at the broker's
longest timer delay. A consumer that asks for an explicit delay level (> 0) gets that level;
-1 still means "dead-letter now", and reaching the maximum reconsume times dead-letters as with
delay levels. :func:`retry_policy` raises InvalidArgumentError naming the offending field
(``groupRetryPolicy.exponentialRetryPolicy.multiplier: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconsume.engine.delays import DelayLevels
from reconsume.engine.retry import (
    DelayLevelPolicy,
    RetryDecision,
    RetryPolicy,
    dead_letter_reason,
)
from reconsume.errors import InvalidArgumentError

CUSTOMIZED = "CUSTOMIZED"
EXPONENTIAL = "EXPONENTIAL"
POLICY_TYPES = (CUSTOMIZED, EXPONENTIAL)
"""RocketMQ 5's ``GroupRetryPolicyType`` names."""
MAX_EXPONENT = 32
"""RocketMQ clamps the exponent (reconsume times) to 0..32."""
DEFAULT_INITIAL_MS = 5_000
DEFAULT_MAX_MS = 7_200_000
DEFAULT_MULTIPLIER = 2
MAX_NEXT_DELAYS = 1_000
"""Longest ``next`` list accepted (a guard against absurd configs; 16 retries is the default)."""
_FIELD = "groupRetryPolicy"


class _Decide:
    """The checks every policy shares before choosing a delay."""

    def __init__(self, levels: DelayLevels, max_delay_ms: int) -> None:
        self.levels = levels
        self.max_delay_ms = max_delay_ms

    def decide(
        self, reconsume_times: int, max_reconsume_times: int, requested_delay_level: int
    ) -> RetryDecision:
        dead = dead_letter_reason(reconsume_times, max_reconsume_times, requested_delay_level)
        if dead is not None:
            return RetryDecision.dead(dead)
        if requested_delay_level > 0:  # the consumer chose a level: it gets that level
            return RetryDecision.retry(self.levels.clamp(requested_delay_level))
        return RetryDecision.retry_after(min(self.delay_ms(reconsume_times), self.max_delay_ms))

    def delay_ms(self, reconsume_times: int) -> int:
        raise NotImplementedError


class CustomizedPolicy(_Decide):
    """An explicit list of delays; the last one repeats."""

    def __init__(self, next_ms: Sequence[int], levels: DelayLevels, max_delay_ms: int) -> None:
        super().__init__(levels, max_delay_ms)
        if not next_ms or any(delay <= 0 for delay in next_ms):
            raise InvalidArgumentError("a customized policy needs positive delays")
        self.next_ms = tuple(next_ms)

    def delay_ms(self, reconsume_times: int) -> int:
        return self.next_ms[min(max(reconsume_times, 0), len(self.next_ms) - 1)]

    def __repr__(self) -> str:
        return f"CustomizedPolicy(next_ms={self.next_ms!r})"


class ExponentialPolicy(_Decide):
    """``initial * multiplier ** reconsumeTimes``, at most ``max``."""

    def __init__(
        self,
        initial_ms: int,
        max_ms: int,
        multiplier: int,
        levels: DelayLevels,
        max_delay_ms: int,
    ) -> None:
        super().__init__(levels, max_delay_ms)
        if initial_ms <= 0 or max_ms < initial_ms or multiplier < 1:
            raise InvalidArgumentError(
                "an exponential policy needs 0 < initial <= max, multiplier >= 1"
            )
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self.multiplier = multiplier

    def delay_ms(self, reconsume_times: int) -> int:
        exponent = min(max(reconsume_times, 0), MAX_EXPONENT)
        growth: int = self.multiplier**exponent
        return min(self.max_ms, self.initial_ms * growth)

    def __repr__(self) -> str:
        return (
            f"ExponentialPolicy(initial_ms={self.initial_ms}, max_ms={self.max_ms}, "
            f"multiplier={self.multiplier})"
        )


def retry_policy(
    document: Mapping[str, Any] | None, levels: DelayLevels, max_delay_ms: int
) -> RetryPolicy:
    """The policy a ``groupRetryPolicy`` object describes (None: the delay levels); raises
    InvalidArgumentError naming the field that is wrong."""
    if document is None:
        return DelayLevelPolicy(levels)
    if not isinstance(document, Mapping):
        raise _invalid(_FIELD, "expected an object", document)
    kind = document.get("type")
    if kind is None:
        kind = CUSTOMIZED  # RocketMQ's default type
    if kind not in POLICY_TYPES:
        raise _invalid(f"{_FIELD}.type", f"expected one of {', '.join(POLICY_TYPES)}", kind)
    if kind == CUSTOMIZED:
        name = "customizedRetryPolicy"
        body = _object(document, name)
        if body is None or body.get("next") is None:
            return DelayLevelPolicy(levels)  # RocketMQ's default list is its delay levels
        return CustomizedPolicy(
            _delays(body["next"], f"{_FIELD}.{name}.next"), levels, max_delay_ms
        )
    name = "exponentialRetryPolicy"
    body = _object(document, name)
    if body is None:
        return DelayLevelPolicy(levels)  # RocketMQ falls back to its default policy
    where = f"{_FIELD}.{name}"
    initial = _millis(body, "initial", DEFAULT_INITIAL_MS, where)
    maximum = _millis(body, "max", DEFAULT_MAX_MS, where)
    multiplier = _millis(body, "multiplier", DEFAULT_MULTIPLIER, where, unit="")
    if maximum < initial:
        raise _invalid(f"{where}.max", f"must not be below initial ({initial})", maximum)
    return ExponentialPolicy(initial, maximum, multiplier, levels, max_delay_ms)


def _object(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    body = document.get(name)
    if body is not None and not isinstance(body, Mapping):
        raise _invalid(f"{_FIELD}.{name}", "expected an object", body)
    return body


def _delays(value: object, where: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise _invalid(where, "expected a non-empty list of delays in milliseconds", value)
    if len(value) > MAX_NEXT_DELAYS:
        raise _invalid(where, f"at most {MAX_NEXT_DELAYS} delays", f"{len(value)} delays")
    return [_positive(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _millis(
    body: Mapping[str, Any], name: str, default: int, where: str, unit: str = " (milliseconds)"
) -> int:
    value = body.get(name)
    return default if value is None else _positive(value, f"{where}.{name}", unit)


def _positive(value: object, where: str, unit: str = " (milliseconds)") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _invalid(where, f"expected a positive integer{unit}", value)
    return value


def _invalid(where: str, problem: str, value: object) -> InvalidArgumentError:
    return InvalidArgumentError(f"{where}: {problem}, got {value!r}")
