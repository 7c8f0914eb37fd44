"""Topic and consumer-group names."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError, InvalidNameError
from reconsume.message import names
from reconsume.message.names import (
    dead_letter_topic,
    group_of,
    is_dead_letter_topic,
    is_retry_topic,
    is_system_topic,
    retry_topic,
    validate_group,
    validate_topic,
)

ALLOWED = set(string.ascii_letters + string.digits + "%|_-")


def is_valid(name: str, max_length: int) -> bool:
    return 0 < len(name) <= max_length and set(name) <= ALLOWED


@pytest.mark.parametrize(
    "name",
    ["TopicTest", "a", "%RETRY%group", "%DLQ%g", "a|b", "under_score-dash", "0123", "t" * 127],
)
def test_valid_topics(name: str) -> None:
    assert validate_topic(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "with space",
        "dot.ted",
        "slash/ed",
        "colon:",
        "é",
        "tab\t",
        "trailing-newline\n",
        "\nleading",
        "mid\nline",
        "٣",  # a non-ASCII digit
        "\uff21",  # FULLWIDTH LATIN CAPITAL LETTER A
        "*",
    ],
)
def test_invalid_characters(name: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        validate_topic(name)
    assert repr(name) in str(info.value)
    with pytest.raises(InvalidNameError) as info:
        validate_group(name)
    assert repr(name) in str(info.value)


def test_empty_names() -> None:
    with pytest.raises(InvalidNameError, match="topic name is empty"):
        validate_topic("")
    with pytest.raises(InvalidNameError, match="group name is empty"):
        validate_group("")


def test_length_limits() -> None:
    assert validate_topic("t" * 127) == "t" * 127
    with pytest.raises(InvalidNameError, match="128 characters; at most 127") as info:
        validate_topic("t" * 128)
    assert "t" * 40 in str(info.value)
    assert validate_group("g" * 255) == "g" * 255
    with pytest.raises(InvalidNameError, match="256 characters; at most 255"):
        validate_group("g" * 256)
    assert names.TOPIC_MAX_LENGTH == 127
    assert names.GROUP_MAX_LENGTH == 255


def test_invalid_name_is_an_argument_error() -> None:
    with pytest.raises(InvalidArgumentError):
        validate_topic("no good")
    with pytest.raises(ValueError, match="no good"):
        validate_topic("no good")


@given(st.from_regex(r"[%|a-zA-Z0-9_-]{1,127}", fullmatch=True))
def test_generated_valid_topics(name: str) -> None:
    assert validate_topic(name) == name
    assert validate_group(name) == name


@given(st.text(max_size=300))
def test_validation_agrees_with_the_rules(name: str) -> None:
    for validate, max_length in ((validate_topic, 127), (validate_group, 255)):
        if is_valid(name, max_length):
            assert validate(name) == name
        else:
            with pytest.raises(InvalidNameError) as info:
                validate(name)
            if not name:
                assert "is empty" in str(info.value)
            elif len(name) > max_length:
                assert repr(name[:40]) in str(info.value)
            else:
                assert repr(name) in str(info.value)


def test_retry_topology_names() -> None:
    assert retry_topic("g1") == "%RETRY%g1"
    assert dead_letter_topic("g1") == "%DLQ%g1"
    assert is_retry_topic("%RETRY%g1")
    assert not is_retry_topic("%DLQ%g1")
    assert is_dead_letter_topic("%DLQ%g1")
    assert not is_dead_letter_topic("TopicTest")
    assert group_of("%RETRY%g1") == "g1"
    assert group_of("%DLQ%g1") == "g1"
    assert group_of("TopicTest") is None


@given(st.from_regex(r"[a-zA-Z0-9_-]{1,100}", fullmatch=True))
def test_retry_and_dlq_topics_are_valid_and_invertible(group: str) -> None:
    for topic in (retry_topic(group), dead_letter_topic(group)):
        assert validate_topic(topic) == topic
        assert group_of(topic) == group


def test_system_topics() -> None:
    assert is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert is_system_topic("rmq_sys_wheel_timer")
    assert is_system_topic("TBW102")
    assert is_system_topic("rmq_sys_anything")
    assert not is_system_topic("TopicTest")
    assert not is_system_topic("%RETRY%g")
