"""The pieces the schedule and timer services share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delivery import next_backoff
from reconsume.engine.retry import DLQ_QUEUE_NUMS, past_max_reconsume_times


def test_the_backoff_doubles_up_to_its_bound() -> None:
    delays = [1.0]
    for _ in range(6):
        delays.append(next_backoff(delays[-1], 20.0))
    assert delays == [1, 2, 4, 8, 16, 20, 20]


@given(st.floats(0.001, 1e6), st.floats(0.001, 1e6))
def test_the_backoff_never_exceeds_its_bound_nor_shrinks_below_it(
    current: float, maximum: float
) -> None:
    after = next_backoff(current, maximum)
    assert after <= maximum
    assert after >= min(current, maximum)


def test_a_retry_is_dead_at_the_maximum() -> None:
    assert not past_max_reconsume_times(15, 16)
    assert past_max_reconsume_times(16, 16)
    assert DLQ_QUEUE_NUMS == 1
