"""Delay levels: RocketMQ's ``messageDelayLevel`` string, parsed into milliseconds.

Level ``n`` (1-based) of ``"1s 5s 10s"`` is the ``n``-th delay; level 0 means "not delayed".
RocketMQ's ``ScheduleMessageService.parseDelayLevel`` reads the same format, with the units
``s m h d``; ``ms`` is accepted as well.
"""

from __future__ import annotations

import re

from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import UNIT_MS

__all__ = ["UNIT_MS", "DelayLevels", "level_of_queue", "parse_delay_levels", "schedule_queue_id"]

_DELAY = re.compile(r"([0-9]{1,9})(ms|s|m|h|d)")


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The delays of ``text`` (whitespace-separated ``<positive integer><unit>``) in
    milliseconds, level 1 first; raises InvalidArgumentError naming the first bad delay."""
    delays = []
    for position, token in enumerate(text.split(), start=1):
        match = _DELAY.fullmatch(token)
        if match is None:
            raise InvalidArgumentError(
                f"delay {position} ({token!r}) is not a positive integer followed by one of "
                f"{', '.join(UNIT_MS)}"
            )
        amount = int(match.group(1))
        if amount == 0:
            raise InvalidArgumentError(f"delay {position} ({token!r}) must be longer than 0")
        delays.append(amount * UNIT_MS[match.group(2)])
    if not delays:
        raise InvalidArgumentError("no delay levels given (e.g. '1s 5s 10s 30s 1m')")
    return tuple(delays)


class DelayLevels:
    """The broker's delay levels: level ``n`` (1-based) waits ``delays_ms[n - 1]``.

    A delayed message of level ``n`` is stored in queue ``n - 1`` of the schedule topic
    (RocketMQ's ``delayLevel2QueueId``); a level above the last is clamped to the last, as
    RocketMQ's ``CommitLog.putMessage`` does.
    """

    __slots__ = ("delays_ms",)

    def __init__(self, delays_ms: tuple[int, ...]) -> None:
        if not delays_ms or any(delay <= 0 for delay in delays_ms):
            raise InvalidArgumentError("delay levels must be a non-empty list of positive delays")
        self.delays_ms = delays_ms

    @classmethod
    def parse(cls, text: str) -> DelayLevels:
        return cls(parse_delay_levels(text))

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def levels(self) -> range:
        """Every level, 1 to :attr:`max_level`."""
        return range(1, len(self.delays_ms) + 1)

    def clamp(self, level: int) -> int:
        """``level`` limited to the last level (callers only delay levels > 0)."""
        return min(level, len(self.delays_ms))

    def delay_ms(self, level: int) -> int:
        """The delay of ``level`` (clamped to the last level); ``level`` must be ≥ 1."""
        return self.delays_ms[min(level, len(self.delays_ms)) - 1]

    def due_ms(self, level: int, store_timestamp_ms: int) -> int:
        """When a message of ``level`` stored at ``store_timestamp_ms`` is due."""
        return store_timestamp_ms + self.delay_ms(level)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DelayLevels) and other.delays_ms == self.delays_ms

    def __hash__(self) -> int:
        return hash(self.delays_ms)

    def __repr__(self) -> str:
        return f"DelayLevels({self.delays_ms!r})"


def schedule_queue_id(level: int) -> int:
    """The schedule-topic queue holding level ``level`` (``delayLevel2QueueId``)."""
    return level - 1


def level_of_queue(queue_id: int) -> int:
    """The delay level a schedule-topic queue holds (``queueId2DelayLevel``)."""
    return queue_id + 1
