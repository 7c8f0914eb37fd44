"""Requests for the ACL tests, built with the headers and bodies clients send."""

from __future__ import annotations

import json
from collections.abc import Callable

from reconsume.access.acl import Perm
from reconsume.wire.broker_headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.headers import Header

PUB, SUB = Perm.PUB, Perm.SUB


def g(group: str) -> str:
    return "%RETRY%" + group


def command(code: int, fields: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, fields, body)


def send_v1(
    topic: str, group: str = "producer", code: int = RequestCode.SEND_MESSAGE
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
    )  # fmt: skip
    return command(code, header.to_ext_fields(), b"body")


def send_v2(topic: str, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        producer_group="producer", topic=topic, default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
    )  # fmt: skip
    return command(code, header.to_ext_fields(), b"body")


def pull(topic: str, group: str) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32,
        sys_flag=0, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
    )  # fmt: skip
    return command(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def heartbeat(
    *consumers: tuple[str, list[str]], producers: tuple[str, ...] = ()
) -> RemotingCommand:
    body = {
        "clientID": "127.0.0.1@1",
        "consumerDataSet": [
            {"groupName": group, "subscriptionDataSet": [{"topic": t} for t in topics]}
            for group, topics in consumers
        ],
        "producerDataSet": [{"groupName": p} for p in producers],
    }
    return command(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


def lock_body(code: int, group: str) -> RemotingCommand:
    mq = {"topic": "orders", "brokerName": "b", "queueId": 0}
    body = {"consumerGroup": group, "clientId": "c1", "mqSet": [mq]}
    return command(code, {}, json.dumps(body).encode())


def header_request(code: int, header: Header) -> Callable[[], RemotingCommand]:
    return lambda: command(code, header.to_ext_fields())


ADMIN, SIGNATURE_ONLY = "admin", "signature only"
# Every code the broker serves, with what it needs: the (resource, permission) pairs of a
# sample request, "admin" or "signature only". A new handler fails
# test_every_served_code_has_a_decision until it is added here and to acl_resources.
DECISIONS: dict[int, tuple[Callable[[], RemotingCommand], list[tuple[str, int]]] | str] = {
    RequestCode.SEND_MESSAGE: (lambda: send_v1("orders"), [("orders", PUB)]),
    RequestCode.SEND_MESSAGE_V2: (lambda: send_v2("orders"), [("orders", PUB)]),
    RequestCode.SEND_BATCH_MESSAGE: (
        lambda: send_v2("orders", RequestCode.SEND_BATCH_MESSAGE),
        [("orders", PUB)],
    ),
    RequestCode.CONSUMER_SEND_MSG_BACK: (
        header_request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            ConsumerSendMsgBackRequestHeader(
                offset=0, group="cg", delay_level=0, origin_topic="orders"
            ),
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.PULL_MESSAGE: (lambda: pull("orders", "cg"), [("orders", SUB), (g("cg"), SUB)]),
    RequestCode.QUERY_CONSUMER_OFFSET: (
        header_request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(consumer_group="cg", topic="orders", queue_id=0),
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.UPDATE_CONSUMER_OFFSET: (
        header_request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(
                consumer_group="cg", topic="orders", queue_id=0, commit_offset=5
            ),
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.ACK_QUEUE_OFFSETS: (
        lambda: command(
            RequestCode.ACK_QUEUE_OFFSETS,
            QueryConsumerOffsetRequestHeader(
                consumer_group="cg", topic="orders", queue_id=0
            ).to_ext_fields(),
            b'{"ranges": [[0, 1]]}',
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.QUERY_ACKED_OFFSETS: (
        header_request(
            RequestCode.QUERY_ACKED_OFFSETS,
            QueryConsumerOffsetRequestHeader(consumer_group="cg", topic="orders", queue_id=0),
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.GET_MAX_OFFSET: (
        header_request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic="orders", queue_id=0)
        ),
        [("orders", SUB)],
    ),
    RequestCode.GET_MIN_OFFSET: (
        header_request(
            RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic="%RETRY%cg", queue_id=0)
        ),
        [(g("cg"), SUB)],
    ),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: (
        header_request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(topic="orders", queue_id=0, timestamp=1),
        ),
        [("orders", SUB)],
    ),
    RequestCode.GET_EARLIEST_MSG_STORETIME: (
        header_request(
            RequestCode.GET_EARLIEST_MSG_STORETIME,
            GetEarliestMsgStoretimeRequestHeader(topic="orders", queue_id=0),
        ),
        [("orders", SUB)],
    ),
    RequestCode.HEART_BEAT: (
        lambda: heartbeat(("cg", ["orders", "%RETRY%cg"]), producers=("pg",)),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.UNREGISTER_CLIENT: (
        header_request(
            RequestCode.UNREGISTER_CLIENT,
            UnregisterClientRequestHeader(client_id="c1", producer_group="pg", consumer_group="cg"),
        ),
        [(g("cg"), SUB)],
    ),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: (
        header_request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            GetConsumerListByGroupRequestHeader(consumer_group="cg"),
        ),
        [(g("cg"), SUB)],
    ),
    RequestCode.LOCK_BATCH_MQ: (
        lambda: lock_body(RequestCode.LOCK_BATCH_MQ, "cg"),
        [(g("cg"), SUB)],
    ),
    RequestCode.UNLOCK_BATCH_MQ: (
        lambda: lock_body(RequestCode.UNLOCK_BATCH_MQ, "cg"),
        [(g("cg"), SUB)],
    ),
    RequestCode.GET_CONSUME_STATS: (
        header_request(
            RequestCode.GET_CONSUME_STATS,
            GetConsumeStatsRequestHeader(consumer_group="cg", topic="orders"),
        ),
        [(g("cg"), SUB), ("orders", SUB)],
    ),
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: (
        header_request(
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, QueryTopicConsumeByWhoRequestHeader(topic="t")
        ),
        [("t", SUB)],
    ),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: (
        header_request(
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            GetConsumerConnectionListRequestHeader(consumer_group="cg"),
        ),
        [(g("cg"), SUB)],
    ),
    RequestCode.UPDATE_AND_CREATE_TOPIC: ADMIN,
    RequestCode.DELETE_TOPIC_IN_BROKER: ADMIN,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ADMIN,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: ADMIN,
    RequestCode.VIEW_MESSAGE_BY_ID: ADMIN,
    RequestCode.REPLICA_HANDSHAKE: ADMIN,
    RequestCode.REPLICATE_LOG: ADMIN,
    RequestCode.REPLICA_METADATA: ADMIN,
    RequestCode.GET_ALL_TOPIC_CONFIG: SIGNATURE_ONLY,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: SIGNATURE_ONLY,
    RequestCode.GET_BROKER_RUNTIME_INFO: SIGNATURE_ONLY,
    RequestCode.GET_BROKER_CONFIG: SIGNATURE_ONLY,
}
