"""Per-group retry policies read from RocketMQ 5's ``groupRetryPolicy`` JSON: the delays per
attempt, the shared dead-letter rules, RocketMQ's defaults, and errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import DelayLevels
from reconsume.engine.policies import CustomizedPolicy, ExponentialPolicy, retry_policy
from reconsume.engine.retry import DeadLetterReason, DelayLevelPolicy, RetryDecision
from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import DEFAULT_DELAY_LEVELS

LEVELS = DelayLevels.parse(DEFAULT_DELAY_LEVELS)
DAY_MS = 86_400_000
MAX_DELAY_MS = 3 * DAY_MS


def policy(document: dict[str, Any] | None) -> Any:
    return retry_policy(document, LEVELS, MAX_DELAY_MS)


def delays(document: dict[str, Any], attempts: int = 6) -> list[int | None]:
    chosen = policy(document)
    return [chosen.decide(r, 16, 0).delay_ms for r in range(attempts)]


def test_customized_follows_its_list_and_repeats_the_last_delay() -> None:
    document = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000, 60000]}}
    assert delays(document) == [1000, 5000, 60000, 60000, 60000, 60000]
    assert isinstance(policy(document), CustomizedPolicy)


def test_exponential_multiplies_up_to_its_max() -> None:
    document = {
        "type": "EXPONENTIAL",
        "exponentialRetryPolicy": {"initial": 1000, "max": 20000, "multiplier": 3},
    }
    assert delays(document) == [1000, 3000, 9000, 20000, 20000, 20000]


def test_exponential_defaults_are_rocketmqs() -> None:
    # RocketMQ's ExponentialRetryPolicyTest: 5 s, then 5 s * 2^10 at reconsumeTimes 10, 2 h cap.
    chosen = policy({"type": "EXPONENTIAL", "exponentialRetryPolicy": {}})
    assert isinstance(chosen, ExponentialPolicy)
    assert chosen.delay_ms(0) == 5_000
    assert chosen.delay_ms(10) == 1024 * 5_000
    assert chosen.delay_ms(100) == 7_200_000
    assert chosen.delay_ms(-1) == 5_000


@pytest.mark.parametrize(
    "document",
    [
        None,
        {},
        {"type": None},
        {"type": "CUSTOMIZED"},
        {"type": "CUSTOMIZED", "customizedRetryPolicy": None},
        {"type": "CUSTOMIZED", "customizedRetryPolicy": {}},
        {"type": "EXPONENTIAL"},
        {"type": "EXPONENTIAL", "customizedRetryPolicy": {"next": [1]}},
    ],
)
def test_a_policy_without_its_object_is_the_delay_levels(document: dict[str, Any] | None) -> None:
    # What RocketMQ 5 writes for every group by default ({"type":"CUSTOMIZED"}) and its
    # fallback for a type without its object: the 18 default levels, i.e. 3 + reconsumeTimes.
    chosen = policy(document)
    assert isinstance(chosen, DelayLevelPolicy)
    assert chosen.decide(0, 16, 0) == RetryDecision.retry(3)


def test_dead_letter_rules_are_the_same_for_every_policy() -> None:
    for chosen in (
        policy({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [10]}}),
        policy({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10}}),
    ):
        assert chosen.decide(3, 3, 0) == RetryDecision.dead(DeadLetterReason.MAX_RECONSUME_TIMES)
        assert chosen.decide(0, 3, -1) == RetryDecision.dead(DeadLetterReason.CONSUMER_REQUESTED)
        # A consumer asking for a level explicitly gets that level (clamped).
        assert chosen.decide(0, 3, 2) == RetryDecision.retry(2)
        assert chosen.decide(0, 3, 99) == RetryDecision.retry(LEVELS.max_level)


def test_delays_are_capped_at_the_longest_timer_delay() -> None:
    document = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [5 * DAY_MS]}}
    assert retry_policy(document, LEVELS, 1000).decide(0, 16, 0) == RetryDecision.retry_after(1000)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"type": "LINEAR"}, "groupRetryPolicy.type"),
        ({"type": "customized"}, "groupRetryPolicy.type"),
        ({"type": 1}, "groupRetryPolicy.type"),
        (
            {"type": "CUSTOMIZED", "customizedRetryPolicy": [1]},
            "groupRetryPolicy.customizedRetryPolicy",
        ),
        ({"customizedRetryPolicy": {"next": []}}, "groupRetryPolicy.customizedRetryPolicy.next"),
        ({"customizedRetryPolicy": {"next": "1s"}}, "groupRetryPolicy.customizedRetryPolicy.next"),
        ({"customizedRetryPolicy": {"next": [1, -5]}}, "customizedRetryPolicy.next[1]"),
        ({"customizedRetryPolicy": {"next": [1, 0]}}, "customizedRetryPolicy.next[1]"),
        ({"customizedRetryPolicy": {"next": [1.5]}}, "customizedRetryPolicy.next[0]"),
        ({"customizedRetryPolicy": {"next": [True]}}, "customizedRetryPolicy.next[0]"),
        ({"customizedRetryPolicy": {"next": [1] * 1001}}, "customizedRetryPolicy.next"),
        ({"type": "EXPONENTIAL", "exponentialRetryPolicy": 5}, "exponentialRetryPolicy"),
        (
            {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 0}},
            "exponentialRetryPolicy.initial",
        ),
        (
            {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"max": "2h"}},
            "exponentialRetryPolicy.max",
        ),
        (
            {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10, "max": 5}},
            "exponentialRetryPolicy.max",
        ),
        (
            {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"multiplier": 0}},
            "exponentialRetryPolicy.multiplier",
        ),
    ],
)
def test_bad_policies_are_refused_naming_the_field(document: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field.replace("[", r"\[").replace("]", r"\]")):
        policy(document)


@given(
    initial=st.integers(1, 10**6),
    extra=st.integers(0, 10**9),
    multiplier=st.integers(1, 10),
    times=st.lists(st.integers(-5, 100), min_size=2, max_size=10),
)
def test_exponential_delays_never_shrink_and_stay_within_bounds(
    initial: int, extra: int, multiplier: int, times: list[int]
) -> None:
    chosen = ExponentialPolicy(initial, initial + extra, multiplier, LEVELS, MAX_DELAY_MS)
    ordered = sorted(times)
    values = [chosen.delay_ms(r) for r in ordered]
    assert values == sorted(values)
    assert all(initial <= v <= initial + extra for v in values)


@given(st.lists(st.integers(1, 10**9), min_size=1, max_size=20), st.integers(0, 50))
def test_customized_picks_the_attempts_delay_or_the_last(next_ms: list[int], times: int) -> None:
    chosen = CustomizedPolicy(next_ms, LEVELS, 10**12)
    expected = next_ms[times] if times < len(next_ms) else next_ms[-1]
    assert chosen.decide(times, times + 1, 0) == RetryDecision.retry_after(expected)
