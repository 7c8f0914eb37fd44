"""Durations written as ``<integer><unit>`` (``500ms``, ``10s``, ``2h``): delay levels, retry
policies and the custom resources use this one format.

The units are RocketMQ's delay-level units ``s m h d`` and ``ms``. :data:`DURATION_PATTERN` is
the strict form the custom resources accept (no zero, no leading zeros, at most nine digits);
:func:`parse_duration_ms` reads it. The broker's delay-level parser
(:mod:`reconsume.engine.delays`) uses the same units and accepts everything this pattern does.
"""

from __future__ import annotations

import re

from reconsume.errors import InvalidArgumentError

UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
"""Milliseconds per unit."""
DURATION_PATTERN = r"^[1-9][0-9]{0,8}(ms|s|m|h|d)$"
"""One positive duration: what the CRDs' ``pattern`` for a duration field says."""
DELAY_LEVELS_PATTERN = r"^ *[1-9][0-9]{0,8}(ms|s|m|h|d)( +[1-9][0-9]{0,8}(ms|s|m|h|d))* *$"
"""Space-separated durations: what the CRDs' ``pattern`` for ``delayLevels`` says."""
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""Apache RocketMQ's ``messageDelayLevel``: a broker's, and a BrokerCluster's, default."""
_DURATION = re.compile(DURATION_PATTERN)


def parse_duration_ms(text: str, where: str = "duration") -> int:
    """``text`` (e.g. ``"10s"``) in milliseconds; raises InvalidArgumentError naming ``where``
    when it is not a positive integer of at most nine digits followed by a unit."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgumentError(
            f"{where}: {text!r} is not a duration such as 500ms, 10s, 5m, 2h or 1d "
            f"(a positive integer followed by one of {', '.join(UNIT_MS)})"
        )
    unit = match.group(1)
    return int(text[: -len(unit)]) * UNIT_MS[unit]
