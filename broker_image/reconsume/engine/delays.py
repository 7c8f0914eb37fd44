"""Delay levels: RocketMQ's ``messageDelayLevel`` string, parsed into milliseconds.

Level ``n`` (1-based) of ``"1s 5s 10s"`` is the ``n``-th delay; level 0 means "not delayed".
RocketMQ's ``ScheduleMessageService.parseDelayLevel`` reads the same format, with the units
``s m h d``; ``ms`` is accepted as well.
"""

from __future__ import annotations

import re

from reconsume.errors import InvalidArgumentError

UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
"""Milliseconds per unit of a delay level."""
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
