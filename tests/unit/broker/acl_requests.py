"""Requests for the ACL tests, built with the headers and bodies clients send."""

from __future__ import annotations

import json
from collections.abc import Callable

from reconsume.broker.acl import Perm
from reconsume.wire.broker_headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
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
