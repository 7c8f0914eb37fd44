"""The retry decision of CONSUMER_SEND_MSG_BACK and the delay-level table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import DelayLevels, level_of_queue, schedule_queue_id
from reconsume.engine.retry import (
    DeadLetterReason,
    DelayLevelPolicy,
    Destination,
    RetryDecision,
    max_reconsume_times,
    next_delay_level,
)
from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import DEFAULT_DELAY_LEVELS

LEVELS = DelayLevels.parse(DEFAULT_DELAY_LEVELS)
POLICY = DelayLevelPolicy(LEVELS)


def test_delay_levels_clamp_and_due_times() -> None:
    levels = DelayLevels((100, 200, 300))
    assert levels.max_level == 3
    assert list(levels.levels()) == [1, 2, 3]
    assert [levels.clamp(n) for n in (1, 3, 4, 99)] == [1, 3, 3, 3]
    assert levels.delay_ms(2) == 200
    assert levels.delay_ms(40) == 300
    assert levels.due_ms(1, 1_000) == 1_100
    assert levels == DelayLevels.parse("100ms 200ms 300ms")
    assert hash(levels) == hash(DelayLevels((100, 200, 300)))
    assert (schedule_queue_id(1), level_of_queue(17)) == (0, 18)
    with pytest.raises(InvalidArgumentError):
        DelayLevels(())
    with pytest.raises(InvalidArgumentError):
        DelayLevels((100, 0))


def test_the_broker_chooses_three_plus_reconsume_times() -> None:
    # With the default 18 levels: 10 s, 30 s, 1 m ... then the last level (2 h) repeats.
    chosen = [POLICY.decide(r, 16, 0).delay_level for r in range(16)]
    assert chosen == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    assert next_delay_level(15, LEVELS) == 18
    assert next_delay_level(40, LEVELS) == 18
    assert next_delay_level(0, DelayLevels((5, 6))) == 2  # fewer levels than 3


def test_dead_letter_at_the_maximum_or_on_request() -> None:
    assert POLICY.decide(16, 16, 0) == RetryDecision.dead(DeadLetterReason.MAX_RECONSUME_TIMES)
    assert POLICY.decide(17, 16, 5).reason is DeadLetterReason.MAX_RECONSUME_TIMES
    assert POLICY.decide(0, 16, -1) == RetryDecision.dead(DeadLetterReason.CONSUMER_REQUESTED)
    assert POLICY.decide(16, 16, -1).reason is DeadLetterReason.CONSUMER_REQUESTED
    assert POLICY.decide(0, 0, 0).dead_letter  # maxReconsumeTimes 0: no retry at all


def test_an_explicit_level_is_kept_or_clamped() -> None:
    assert POLICY.decide(0, 16, 1) == RetryDecision(Destination.RETRY, delay_level=1)
    assert POLICY.decide(5, 16, 7).delay_level == 7
    assert POLICY.decide(5, 16, 99).delay_level == 18


def test_the_header_maximum_overrides_the_group() -> None:
    assert max_reconsume_times(16, None) == 16
    assert max_reconsume_times(16, 3) == 3
    assert max_reconsume_times(1, 20) == 20


@given(
    reconsume_times=st.integers(0, 100),
    maximum=st.integers(-1, 40),
    requested=st.integers(-5, 40),
    level_count=st.integers(1, 30),
)
def test_decisions_are_total_and_consistent(
    reconsume_times: int, maximum: int, requested: int, level_count: int
) -> None:
    levels = DelayLevels(tuple(range(1, level_count + 1)))
    decision = DelayLevelPolicy(levels).decide(reconsume_times, maximum, requested)
    dead = requested < 0 or reconsume_times >= maximum
    assert decision.dead_letter is dead
    if dead:
        assert decision.reason is not None
        assert decision.delay_level == 0
    else:
        assert decision.reason is None
        assert 1 <= decision.delay_level <= level_count
        expected = requested if requested > 0 else 3 + reconsume_times
        assert decision.delay_level == min(expected, level_count)
