"""Properties strings: RocketMQ's ``name\\x01value\\x02`` encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError, PropertyError
from reconsume.message import properties as props
from reconsume.message.properties import decode_properties, encode_properties, find_property

plain = st.text(
    st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), max_size=30
)
names = plain.filter(bool)
property_dicts = st.dictionaries(names, plain, max_size=10)


def test_rocketmq_property_names() -> None:
    assert props.TAGS == "TAGS"
    assert props.KEYS == "KEYS"
    assert props.DELAY_TIME_LEVEL == "DELAY"
    assert props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert props.RETRY_TOPIC == "RETRY_TOPIC"
    assert props.REAL_TOPIC == "REAL_TOPIC"
    assert props.REAL_QUEUE_ID == "REAL_QID"
    assert props.RECONSUME_TIME == "RECONSUME_TIME"
    assert props.MAX_RECONSUME_TIMES == "MAX_RECONSUME_TIMES"
    assert props.ORIGIN_MESSAGE_ID == "ORIGIN_MESSAGE_ID"
    assert props.TRANSACTION_PREPARED == "TRAN_MSG"
    assert props.PRODUCER_GROUP == "PGROUP"
    assert props.WAIT_STORE_MSG_OK == "WAIT"
    assert props.NAME_VALUE_SEPARATOR == "\x01"
    assert props.PROPERTY_SEPARATOR == "\x02"


def test_encode_known_string() -> None:
    text = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"})
    assert text == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02"


def test_encode_empty() -> None:
    assert encode_properties({}) == ""
    assert decode_properties("") == {}


def test_decode_known_string() -> None:
    assert decode_properties("TAGS\x01TagA\x02KEYS\x01k1 k2\x02") == {
        "TAGS": "TagA",
        "KEYS": "k1 k2",
    }


def test_decode_without_trailing_separator() -> None:
    assert decode_properties("A\x011\x02B\x012") == {"A": "1", "B": "2"}


def test_decode_skips_malformed_entries() -> None:
    assert decode_properties("junk\x02A\x011\x02\x02\x01nameless\x02B\x012\x02") == {
        "A": "1",
        "B": "2",
    }


def test_decode_keeps_first_name_value_separator() -> None:
    assert decode_properties("A\x01x\x01y\x02") == {"A": "x\x01y"}


def test_decode_later_duplicate_wins() -> None:
    assert decode_properties("A\x011\x02A\x012\x02") == {"A": "2"}


def test_empty_value_round_trips() -> None:
    assert decode_properties(encode_properties({"A": ""})) == {"A": ""}


@pytest.mark.parametrize(
    "bad",
    [
        {"": "v"},
        {"a\x01b": "v"},
        {"a\x02b": "v"},
        {"a": "v\x01"},
        {"a": "\x02v"},
        {"ok": "fine", "bad": "x\x02y"},
    ],
)
def test_separators_are_rejected(bad: dict[str, str]) -> None:
    with pytest.raises(PropertyError):
        encode_properties(bad)


def test_property_error_is_an_argument_error() -> None:
    with pytest.raises(InvalidArgumentError):
        encode_properties({"a": "\x01"})


@given(property_dicts)
def test_round_trip(properties: dict[str, str]) -> None:
    text = encode_properties(properties)
    assert decode_properties(text) == properties
    for name, value in properties.items():
        assert find_property(text, name) == value


@given(property_dicts, names)
def test_find_missing_property(properties: dict[str, str], name: str) -> None:
    text = encode_properties(properties)
    assert find_property(text, name) == properties.get(name)


def test_find_property_known_cases() -> None:
    text = "XTAGS\x01no\x02TAGS\x01yes\x02"
    assert find_property(text, "TAGS") == "yes"
    assert find_property(text, "XTAGS") == "no"
    assert find_property(text, "AGS") is None
    assert find_property("A\x01TAGS\x01v\x02", "TAGS") is None  # inside a value
    assert find_property("TAGS\x01last", "TAGS") == "last"
    assert find_property("", "TAGS") is None


def test_find_property_later_duplicate_wins_like_decode() -> None:
    text = "TAGS\x01first\x02TAGS\x01second\x02"
    assert find_property(text, "TAGS") == decode_properties(text)["TAGS"] == "second"


@given(
    st.text(st.sampled_from("ab\x01\x02"), max_size=30),
    st.text(st.sampled_from("ab"), min_size=1, max_size=3),
)
def test_find_property_agrees_with_decode_on_any_text(text: str, name: str) -> None:
    assert find_property(text, name) == decode_properties(text).get(name)
