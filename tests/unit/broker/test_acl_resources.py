"""What each request needs (:func:`reconsume.broker.acl.required`) beyond the table of
served codes in test_acl.py: retry and dead-letter topics as their group, the send and
heartbeat details, requests that do not parse; and the permission bits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconsume.access.acl import Perm, parse_perm
from reconsume.access.perms import allows, perm_name
from reconsume.broker.acl_resources import required
from reconsume.errors import InvalidArgumentError
from reconsume.wire.broker_headers import QueryMessageRequestHeader, UnregisterClientRequestHeader
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from tests.acl_requests import PUB, SUB, command, g, heartbeat, pull, send_v1, send_v2


@pytest.mark.parametrize("make", [send_v1, send_v2])
def test_send_to_a_retry_or_dead_letter_topic_needs_sub_on_the_group(
    make: Callable[[str], RemotingCommand],
) -> None:
    assert required(make("%RETRY%cg")) == [(g("cg"), SUB)]
    assert required(make("%DLQ%cg")) == [(g("cg"), SUB)]


def test_send_v2_code_with_v1_names_is_read_as_the_handler_reads_it() -> None:
    request = send_v1("orders", code=RequestCode.SEND_MESSAGE_V2)
    assert required(request) == [("orders", PUB)]


def test_send_to_the_trace_topic_needs_nothing() -> None:
    assert required(send_v2("RMQ_SYS_TRACE_TOPIC")) == []


def test_pull_of_retry_and_dead_letter_topics_is_the_group() -> None:
    assert required(pull("%RETRY%cg", "cg")) == [(g("cg"), SUB)] * 2
    assert required(pull("%DLQ%cg", "dlq-job")) == [(g("cg"), SUB), (g("dlq-job"), SUB)]


def test_heartbeat_lists_each_group_and_topic_once() -> None:
    request = heartbeat(("a", ["t1", "t2"]), ("b", ["t1", "%DLQ%a"]))
    assert required(request) == [(g("a"), SUB), ("t1", SUB), ("t2", SUB), (g("b"), SUB)]


def test_producer_only_heartbeat_and_unregister_need_nothing() -> None:
    assert required(heartbeat(producers=("pg",))) == []
    header = UnregisterClientRequestHeader(client_id="c1", producer_group="pg")
    assert required(command(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())) == []


def test_query_message_needs_sub_on_the_topic() -> None:
    header = QueryMessageRequestHeader(
        topic="orders", key="k", max_num=1, begin_timestamp=0, end_timestamp=1
    )
    assert required(command(RequestCode.QUERY_MESSAGE, header.to_ext_fields())) == [("orders", SUB)]


@pytest.mark.parametrize(
    "request_",
    [
        command(RequestCode.HEART_BEAT, {}, b"not json"),
        command(RequestCode.HEART_BEAT, {}, b'{"consumerDataSet": [1]}'),
        command(RequestCode.HEART_BEAT, {}, b'{"consumerDataSet": [{"groupName": "a b"}]}'),
        command(
            RequestCode.HEART_BEAT,
            {},
            b'{"consumerDataSet": [{"groupName": "a", "subscriptionDataSet": ["t"]}]}',
        ),
        command(RequestCode.PULL_MESSAGE, {"topic": "t"}),
        command(RequestCode.LOCK_BATCH_MQ, {}, b'{"mqSet": []}'),
        command(RequestCode.SEND_MESSAGE_V2, {"b": "t"}),
    ],
    ids=["not-json", "non-object", "bad-group", "non-object-subscription", "pull", "lock", "send"],
)
def test_unparsable_requests_raise(request_: RemotingCommand) -> None:
    with pytest.raises(InvalidArgumentError):
        required(request_)


# ------------------------------------------------------------------ permissions
@pytest.mark.parametrize(
    ("text", "perm"),
    [("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB), ("SUB|PUB", PUB | SUB), (" DENY ", 1)],
)
def test_parse_perm(text: str, perm: Perm) -> None:
    assert parse_perm(text, "x") == perm


@pytest.mark.parametrize("text", ["pub", "ANY", "PUB|DENY", "PUB SUB", "", None, 4])
def test_parse_perm_refuses(text: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"account a: topic_perms\.t"):
        parse_perm(text, "account a: topic_perms.t")


@pytest.mark.parametrize(
    ("have", "need", "allowed"),
    [
        (PUB, PUB, True),
        (SUB, PUB, False),
        (PUB | SUB, SUB, True),
        (Perm.DENY, SUB, False),
        (Perm.DENY | PUB, PUB, False),
        (PUB, Perm.ANY, True),
        (SUB, Perm.ANY, True),
        (Perm.DENY, Perm.ANY, False),
    ],
)
def test_allows(have: int, need: int, allowed: bool) -> None:
    assert allows(have, need) is allowed


def test_perm_names() -> None:
    assert [perm_name(p) for p in (PUB, SUB, PUB | SUB, Perm.DENY, Perm.ANY)] == [
        "PUB", "SUB", "PUB|SUB", "DENY", "ANY",
    ]  # fmt: skip
