"""Subscription: tag-expression parsing as RocketMQ's FilterAPI does it, the client-side tag
check, and the SubscriptionData JSON whose codeSet holds Java String.hashCode values."""

from __future__ import annotations

import time

import pytest

from reconsume.client.subscription import SUB_ALL, Subscription, heartbeat_body
from reconsume.errors import InvalidArgumentError
from tests.unit.client._helpers import stored

# Java's String.hashCode, worked out by hand: h = 31 * h + c over the UTF-16 code units.
# "TagA": ((84 * 31 + 97) * 31 + 103) * 31 + 65 = 2598919
JAVA_HASH = {
    "TagA": 2598919,
    "TagB": 2598920,
    "Aa": 2112,  # 65 * 31 + 97
    "BB": 2112,  # 66 * 31 + 66: the classic collision the client re-checks by string
    "polygenelubricants": -(2**31),  # overflows to Integer.MIN_VALUE
    "\U0001f600": 1772899,  # surrogates 0xD83D, 0xDE00: 55357 * 31 + 56832
}


@pytest.mark.parametrize("expression", [None, "", "   ", "*", " * "])
def test_empty_or_star_subscribes_to_everything(expression: str | None) -> None:
    subscription = Subscription.parse("T", expression)
    assert subscription.expression == SUB_ALL
    assert subscription.tags is None
    assert Subscription.parse("T").tags is None


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        ("TagA", {"TagA"}),
        ("TagA || TagB", {"TagA", "TagB"}),
        ("TagA||TagB", {"TagA", "TagB"}),
        ("  TagA ||  TagB ||  ", {"TagA", "TagB"}),
        ("|| TagA", {"TagA"}),
        ("TagA || TagA", {"TagA"}),
        # only "||" separates: a single bar is part of the tag
        ("a | b", {"a | b"}),
    ],
)
def test_tag_expressions(expression: str, tags: set[str]) -> None:
    subscription = Subscription.parse("T", expression)
    assert subscription.tags == frozenset(tags)
    assert subscription.expression == expression.strip()
    assert subscription.topic == "T"


@pytest.mark.parametrize("expression", ["||", " || ", "|| ||", "||||"])
def test_an_expression_naming_no_tag_is_refused(expression: str) -> None:
    with pytest.raises(InvalidArgumentError, match="names no tag"):
        Subscription.parse("T", expression)


def test_accepts_compares_the_tag_strings() -> None:
    tagged = Subscription.parse("T", "TagA || Aa")
    assert tagged.accepts(stored(properties={"TAGS": "TagA"}))
    assert tagged.accepts(stored(properties={"TAGS": "Aa"}))
    # same hash code as "Aa", so the broker lets it through; the client must not
    assert not tagged.accepts(stored(properties={"TAGS": "BB"}))
    assert not tagged.accepts(stored(properties={"TAGS": "TagA || Aa"}))
    assert not tagged.accepts(stored(properties={}))
    everything = Subscription.parse("T", "*")
    assert everything.accepts(stored(properties={"TAGS": "BB"}))
    assert everything.accepts(stored(properties={}))


def test_version_is_the_parse_time_in_milliseconds() -> None:
    before_ms = time.time_ns() // 1_000_000
    version = Subscription.parse("T", "TagA").version
    after_ms = time.time_ns() // 1_000_000
    assert before_ms <= version <= after_ms


def test_json_code_set_holds_java_hash_codes_in_tag_order() -> None:
    expression = " || ".join(JAVA_HASH)
    document = Subscription.parse("T", expression).to_json()
    tags = sorted(JAVA_HASH)
    assert document == {
        "classFilterMode": False,
        "topic": "T",
        "subString": expression,
        "tagsSet": tags,
        "codeSet": [JAVA_HASH[tag] for tag in tags],
        "subVersion": document["subVersion"],
        "expressionType": "TAG",
    }
    assert isinstance(document["subVersion"], int)


def test_json_of_star_has_no_tags() -> None:
    document = Subscription.parse("T").to_json()
    assert document["subString"] == "*"
    assert document["tagsSet"] == []
    assert document["codeSet"] == []


def test_heartbeat_body_carries_every_subscription() -> None:
    subscriptions = [Subscription.parse("T", "TagA"), Subscription.parse("%RETRY%g")]
    body = heartbeat_body(
        "10.0.0.1@1",
        "CLIENT_INNER_PRODUCER",
        "g",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
        subscriptions,
    )
    assert body["clientID"] == "10.0.0.1@1"
    assert body["producerDataSet"] == [{"groupName": "CLIENT_INNER_PRODUCER"}]
    (consumer,) = body["consumerDataSet"]
    assert consumer["groupName"] == "g"
    assert consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert consumer["messageModel"] == "CLUSTERING"
    assert consumer["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    assert consumer["subscriptionDataSet"] == [s.to_json() for s in subscriptions]
