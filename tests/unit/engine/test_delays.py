"""Delay-level strings."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.engine.delays import UNIT_MS, parse_delay_levels
from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import DEFAULT_DELAY_LEVELS


def test_rocketmq_default_levels_parse_to_milliseconds() -> None:
    delays = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(delays) == 18
    assert delays[:4] == (1_000, 5_000, 10_000, 30_000)
    assert delays[-1] == 2 * 3_600_000


def test_every_unit_and_any_whitespace() -> None:
    expected = (250, 1_000, 120_000, 10_800_000, 86_400_000)
    assert parse_delay_levels(" 250ms\t1s\n2m 3h  1d ") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no delay levels"),
        ("   ", "no delay levels"),
        ("1s 5x", "delay 2 ('5x')"),
        ("1s 0s", "delay 2 ('0s') must be longer than 0"),
        ("-1s", "delay 1 ('-1s')"),
        ("1.5s", "delay 1"),
        ("s", "delay 1"),
        ("1S", "delay 1"),
        ("1s,5s", "delay 1"),
        ("1234567890s", "delay 1"),
    ],
)
def test_bad_levels_name_the_delay(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        parse_delay_levels(text)


@given(st.lists(st.tuples(st.integers(1, 10**6), st.sampled_from(sorted(UNIT_MS))), min_size=1))
def test_round_trip(levels: list[tuple[int, str]]) -> None:
    text = " ".join(f"{amount}{unit}" for amount, unit in levels)
    assert parse_delay_levels(text) == tuple(amount * UNIT_MS[unit] for amount, unit in levels)
