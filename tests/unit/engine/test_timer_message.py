"""How a sent message with a delay is routed: delay level first, then the timer properties in
RocketMQ 5's order; past due times stay in their topic; illegal values are refused; the timer
topic's tag code is the due time."""

from __future__ import annotations

import pytest

from reconsume.engine.delays import DelayLevels
from reconsume.engine.scheduled import schedule_tags_code
from reconsume.engine.timer_message import (
    TIMER_QUEUE_ID,
    route_delayed,
    timer_due_ms,
    timer_tags_code,
    to_timer,
)
from reconsume.errors import InvalidArgumentError
from reconsume.message import properties as props
from reconsume.message.names import SCHEDULE_TOPIC, TIMER_TOPIC
from reconsume.store.requests import default_tags_code

LEVELS = DelayLevels((100, 200))
NOW = 1_700_000_000_000
MAX_MS = 10_000


def route(properties: dict[str, str]) -> tuple[str, int]:
    return route_delayed(properties, "orders", 3, LEVELS, now_ms=NOW, max_delay_ms=MAX_MS)


@pytest.mark.parametrize(
    ("properties", "due"),
    [
        ({props.TIMER_DELAY_MS: "250"}, NOW + 250),
        ({props.TIMER_DELAY_SEC: "2"}, NOW + 2000),
        ({props.TIMER_DELIVER_MS: str(NOW + 7)}, NOW + 7),
        # RocketMQ's precedence: seconds, then milliseconds, then the absolute time.
        ({props.TIMER_DELAY_SEC: "1", props.TIMER_DELAY_MS: "5"}, NOW + 1000),
        ({props.TIMER_DELAY_MS: "5", props.TIMER_DELIVER_MS: str(NOW + 9)}, NOW + 5),
    ],
)
def test_a_timer_message_goes_to_the_timer_topic_due_to_the_ms(
    properties: dict[str, str], due: int
) -> None:
    assert route(properties) == (TIMER_TOPIC, TIMER_QUEUE_ID)
    assert properties[props.TIMER_OUT_MS] == str(due)
    assert (properties[props.REAL_TOPIC], properties[props.REAL_QUEUE_ID]) == ("orders", "3")
    assert timer_due_ms(properties, NOW) == due


def test_a_delay_level_wins_and_drops_the_timer_properties() -> None:
    properties = {
        props.DELAY_TIME_LEVEL: "2",
        props.TIMER_DELAY_MS: "5",
        props.TIMER_DELAY_SEC: "1",
    }
    assert route(properties) == (SCHEDULE_TOPIC, 1)
    assert props.TIMER_DELAY_MS not in properties
    assert props.TIMER_DELAY_SEC not in properties
    assert props.TIMER_OUT_MS not in properties


@pytest.mark.parametrize(
    "properties",
    [
        {props.TIMER_DELAY_MS: "0"},
        {props.TIMER_DELAY_MS: "-50"},
        {props.TIMER_DELIVER_MS: str(NOW)},
        {props.TIMER_DELIVER_MS: "1"},
        {props.DELAY_TIME_LEVEL: "0"},
        {props.TIMER_DELAY_MS: "500", props.TIMER_OUT_MS: str(NOW - 3)},  # delivered once already
        {},
    ],
)
def test_due_now_or_already_delivered_stays_in_its_topic(properties: dict[str, str]) -> None:
    before = dict(properties)
    assert route(properties) == ("orders", 3)
    assert properties == before


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({props.TIMER_DELAY_MS: "soon"}, "TIMER_DELAY_MS 'soon' is not an integer"),
        ({props.TIMER_DELIVER_MS: "1.5e12"}, "TIMER_DELIVER_MS"),
        ({props.TIMER_DELAY_MS: str(MAX_MS + 1)}, "longer than the broker's longest timer delay"),
        ({props.TIMER_DELAY_SEC: "11"}, "longest timer delay"),
    ],
)
def test_illegal_timer_messages_are_refused(properties: dict[str, str], problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        route(properties)


def test_the_longest_delay_itself_is_accepted() -> None:
    assert route({props.TIMER_DELAY_MS: str(MAX_MS)}) == (TIMER_TOPIC, TIMER_QUEUE_ID)


def test_to_timer_replaces_a_delay_level() -> None:
    properties = {props.DELAY_TIME_LEVEL: "3"}
    assert to_timer(properties, "%RETRY%g", 0, NOW + 5) == (TIMER_TOPIC, 0)
    assert properties == {
        props.TIMER_OUT_MS: str(NOW + 5),
        props.REAL_TOPIC: "%RETRY%g",
        props.REAL_QUEUE_ID: "0",
    }


def test_the_tag_code_hooks_compose() -> None:
    hook = timer_tags_code(schedule_tags_code(LEVELS))
    timer = props.encode_properties({props.TIMER_OUT_MS: str(NOW + 42), props.TAGS: "a"})
    assert hook(TIMER_TOPIC, timer, NOW) == NOW + 42
    assert hook(TIMER_TOPIC, props.encode_properties({props.TAGS: "a"}), NOW) == NOW  # due now
    scheduled = props.encode_properties({props.DELAY_TIME_LEVEL: "2"})
    assert hook(SCHEDULE_TOPIC, scheduled, NOW) == NOW + 200
    tagged = props.encode_properties({props.TAGS: "a", props.TIMER_OUT_MS: "9"})
    assert hook("orders", tagged, NOW) == default_tags_code("orders", tagged, NOW)
