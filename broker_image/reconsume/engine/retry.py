"""The retry decision of CONSUMER_SEND_MSG_BACK: retry later at a delay level, or dead-letter.

Pure functions of the message's reconsume times, the maximum and what the consumer asked
for (RocketMQ's ``consumerSendMsgBack``): ``reconsumeTimes >= max`` or a negative delay level
dead-letters the message; otherwise it is retried at the requested level, or at
``3 + reconsumeTimes`` when the consumer left the choice to the broker (level 0), clamped to
the last level.

:class:`RetryPolicy` is the seam for per-group policies: the delay-level policy here answers
with a level (the schedule service delivers it); the Customized and Exponential policies of
:mod:`reconsume.engine.policies` answer with a delay in milliseconds (the timer wheel
delivers it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from reconsume.engine.delays import DelayLevels

RETRY_DELAY_LEVEL_BASE = 3
"""The broker's delay level for a retry is ``3 + reconsumeTimes`` (10 s for the first, with
the default levels)."""


class Destination(StrEnum):
    RETRY = "retry"
    """Delayed, then delivered to ``%RETRY%<group>``."""
    DEAD_LETTER = "dead_letter"
    """Stored in ``%DLQ%<group>`` at once."""


class DeadLetterReason(StrEnum):
    """Why a message became a dead letter (the ``RECONSUME_DLQ_REASON`` property)."""

    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    """It was consumed ``maxReconsumeTimes`` times and failed every time."""
    CONSUMER_REQUESTED = "CONSUMER_REQUESTED"
    """The consumer sent it back with delay level -1 (straight to the dead-letter queue)."""


@dataclass(frozen=True, slots=True)
class RetryDecision:
    destination: Destination
    delay_level: int = 0
    """For a retry at a delay level: the level (1 to the last level); 0 with ``delay_ms``."""
    delay_ms: int | None = None
    """For a retry on the timer wheel: milliseconds from now (None: at ``delay_level``)."""
    reason: DeadLetterReason | None = None
    """For a dead letter: why."""

    @property
    def dead_letter(self) -> bool:
        return self.destination is Destination.DEAD_LETTER

    @classmethod
    def retry(cls, delay_level: int) -> RetryDecision:
        return cls(Destination.RETRY, delay_level=delay_level)

    @classmethod
    def retry_after(cls, delay_ms: int) -> RetryDecision:
        return cls(Destination.RETRY, delay_ms=delay_ms)

    @classmethod
    def dead(cls, reason: DeadLetterReason) -> RetryDecision:
        return cls(Destination.DEAD_LETTER, reason=reason)


class RetryPolicy(Protocol):
    def decide(
        self, reconsume_times: int, max_reconsume_times: int, requested_delay_level: int
    ) -> RetryDecision:
        """What happens to a message consumed ``reconsume_times`` times before and failed
        again; ``requested_delay_level`` is the consumer's (0: the broker decides, < 0: dead
        letter, > 0: that level)."""


DLQ_QUEUE_NUMS = 1
"""Queues of a ``%DLQ%<group>`` topic (RocketMQ's ``DLQ_NUMS_PER_GROUP``)."""


def past_max_reconsume_times(reconsume_times: int, max_times: int) -> bool:
    """Whether a message consumed ``reconsume_times`` times is a dead letter (RocketMQ's
    ``handleRetryAndDLQ`` for a plain send to ``%RETRY%``, and every policy's limit)."""
    return reconsume_times >= max_times


def max_reconsume_times(group_retry_max_times: int, header_max_reconsume_times: int | None) -> int:
    """The group's ``retryMaxTimes``, overridden by the consumer's ``maxReconsumeTimes``."""
    if header_max_reconsume_times is not None:
        return header_max_reconsume_times
    return group_retry_max_times


def dead_letter_reason(
    reconsume_times: int, max_reconsume_times: int, requested_delay_level: int
) -> DeadLetterReason | None:
    """Why a send-back goes to the dead-letter queue whatever the policy, or None: the
    consumer asked for it (a negative delay level), or the message has been reconsumed its
    group's maximum number of times."""
    if requested_delay_level < 0:
        return DeadLetterReason.CONSUMER_REQUESTED
    if past_max_reconsume_times(reconsume_times, max_reconsume_times):
        return DeadLetterReason.MAX_RECONSUME_TIMES
    return None


def next_delay_level(reconsume_times: int, levels: DelayLevels) -> int:
    """``3 + reconsumeTimes``, clamped to the last level (and to at least level 1)."""
    return max(1, levels.clamp(RETRY_DELAY_LEVEL_BASE + reconsume_times))


class DelayLevelPolicy:
    """Apache RocketMQ 4.x's policy: the delay levels of the broker."""

    def __init__(self, levels: DelayLevels) -> None:
        self.levels = levels

    def decide(
        self, reconsume_times: int, max_reconsume_times: int, requested_delay_level: int
    ) -> RetryDecision:
        dead = dead_letter_reason(reconsume_times, max_reconsume_times, requested_delay_level)
        if dead is not None:
            return RetryDecision.dead(dead)
        if requested_delay_level == 0:
            return RetryDecision.retry(next_delay_level(reconsume_times, self.levels))
        return RetryDecision.retry(self.levels.clamp(requested_delay_level))
