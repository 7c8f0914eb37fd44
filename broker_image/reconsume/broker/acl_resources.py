"""What each request needs from an account: the admin flag, or a permission on topics and
consumer groups, or nothing beyond a valid signature.

Permissions and resource names are Apache RocketMQ's (``Permission``, ``PlainAccessResource``):
a consumer group ``g`` is the resource ``%RETRY%g``, so a request on the group's retry topic
(a send of a message to retry, a pull from it) is checked as a request on the group. Its
dead-letter topic ``%DLQ%g`` is checked as the group too, where RocketMQ checks it as a topic
of that name: the group's owner reads its dead letters without a topic permission per group.
So is the group ``%DLQ%g`` whose offsets the dead-letter jobs commit (``dead_letter_job_group``):
the group's owner marks its dead letters handled with its permission on ``g``.

Where RocketMQ versions differ, 5.3 (the last with this ACL) decides: a send to ``%RETRY%g``
needs SUB on the group (4.9.8 checked nothing for SEND_MESSAGE and the producer group for
SEND_MESSAGE_V2) and SEND_BATCH_MESSAGE is checked like a single send (4.9.8 checked nothing).
A send to ``RMQ_SYS_TRACE_TOPIC`` needs no permission, as in every version: every client with
message tracing on writes there.

Deliberately stricter than RocketMQ, which checks only the signature for these: every request
naming a topic or a group in its header or body needs SUB on it. That is QUERY_CONSUMER_OFFSET
(the group and the topic, as UPDATE_CONSUMER_OFFSET), LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (the
group), GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME
and QUERY_TOPIC_CONSUME_BY_WHO (the topic), GET_CONSUME_STATS (the group, and the topic when
named) and GET_CONSUMER_CONNECTION_LIST (the group). A consumer has these permissions on what
it consumes; an admin account passes anyway. Also stricter: VIEW_MESSAGE_BY_ID reads any
message by its commit-log offset without naming a topic, so it needs an admin, and so do the
replication requests (a replica reads the whole log).

Every code the broker serves is in exactly one of :data:`ADMIN_CODES`, :data:`RESOURCE_CODES`
and :data:`SIGNATURE_ONLY_CODES` (a unit test holds the broker's handlers to that).
"""

from __future__ import annotations

from collections.abc import Callable

from reconsume.access.perms import (
    Needs,
    Perm,
    Rules,
    group_resource,
    is_group_resource,
    topic_resource,
)
from reconsume.broker.clients import json_body, json_list, lock_body
from reconsume.broker.consumers import subscription_from_json
from reconsume.broker.send import parse_send_header
from reconsume.errors import InvalidArgumentError
from reconsume.message.names import validate_group
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
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""Message traces, sent by any client with tracing on; never needs a permission."""

ADMIN_CODES: frozenset[int] = frozenset(
    {
        # RocketMQ 5.3's ADMIN_CODE (the ACL requests 50-52 and static topics 513 it adds are
        # not served here).
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        # Stricter than RocketMQ: any message, and the whole log.
        RequestCode.VIEW_MESSAGE_BY_ID,
        RequestCode.REPLICA_HANDSHAKE,
        RequestCode.REPLICATE_LOG,
        RequestCode.REPLICA_METADATA,
    }
)
"""Requests only an account with ``admin = true`` may make."""

SIGNATURE_ONLY_CODES: frozenset[int] = frozenset(
    {
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_BROKER_CONFIG,
    }
)
"""Requests any account may make: they name no topic or group and read no message (the
lists of topics and groups, the broker's configuration and statistics)."""


def _send(request: RemotingCommand) -> Needs:
    """The topic as the send handler reads it (V1 or V2 names): PUB, or SUB on the group for
    its retry or dead-letter topic."""
    topic = parse_send_header(request).topic
    if topic == TRACE_TOPIC:
        return []
    resource = topic_resource(topic)
    return [(resource, Perm.SUB if is_group_resource(resource) else Perm.PUB)]


def _send_back(request: RemotingCommand) -> Needs:
    """SUB on the group, and on the origin topic the request names: the handler, with access
    control on, sends back only a message of that topic or of the group's retry topic (the
    request names a commit-log offset, which says nothing of the topic)."""
    header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
    needs: Needs = [(group_resource(header.group), Perm.SUB)]
    if header.origin_topic:
        needs.append((topic_resource(header.origin_topic), Perm.SUB))
    return list(dict.fromkeys(needs))


def _pull(request: RemotingCommand) -> Needs:
    header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
    return [
        (topic_resource(header.topic), Perm.SUB),
        (group_resource(header.consumer_group), Perm.SUB),
    ]


def _group_and_topic(
    header_class: type[QueryConsumerOffsetRequestHeader] | type[UpdateConsumerOffsetRequestHeader],
) -> Callable[[RemotingCommand], Needs]:
    def needs(request: RemotingCommand) -> Needs:
        header = header_class.from_ext_fields(request.ext_fields)
        return [
            (group_resource(header.consumer_group), Perm.SUB),
            (topic_resource(header.topic), Perm.SUB),
        ]

    return needs


_TopicHeader = (
    type[GetMaxOffsetRequestHeader]
    | type[GetMinOffsetRequestHeader]
    | type[SearchOffsetRequestHeader]
    | type[GetEarliestMsgStoretimeRequestHeader]
    | type[QueryMessageRequestHeader]
    | type[QueryTopicConsumeByWhoRequestHeader]
)


def _topic(header_class: _TopicHeader) -> Callable[[RemotingCommand], Needs]:
    def needs(request: RemotingCommand) -> Needs:
        header = header_class.from_ext_fields(request.ext_fields)
        return [(topic_resource(header.topic), Perm.SUB)]

    return needs


def _heartbeat(request: RemotingCommand) -> Needs:
    """Each consumer group of the ``HeartbeatData`` body and each topic it subscribes to,
    read as the heartbeat handler reads them. Producer groups need nothing (RocketMQ)."""
    needs: Needs = []
    document = json_body(request, "HeartbeatData")
    for data in json_list(document, "consumerDataSet"):
        if not isinstance(data, dict):
            raise InvalidArgumentError("consumerDataSet holds a non-object")
        group = validate_group(str(data.get("groupName") or ""))
        needs.append((group_resource(group), Perm.SUB))
        for subscription in json_list(data, "subscriptionDataSet"):
            if not isinstance(subscription, dict):
                raise InvalidArgumentError("subscriptionDataSet holds a non-object")
            topic = subscription_from_json(subscription).topic
            needs.append((topic_resource(topic), Perm.SUB))
    return list(dict.fromkeys(needs))


def _unregister(request: RemotingCommand) -> Needs:
    header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
    return [] if not header.consumer_group else [(group_resource(header.consumer_group), Perm.SUB)]


def _consumer_group(
    header_class: type[GetConsumerListByGroupRequestHeader]
    | type[GetConsumerConnectionListRequestHeader],
) -> Callable[[RemotingCommand], Needs]:
    def needs(request: RemotingCommand) -> Needs:
        header = header_class.from_ext_fields(request.ext_fields)
        return [(group_resource(header.consumer_group), Perm.SUB)]

    return needs


def _lock(what: str) -> Callable[[RemotingCommand], Needs]:
    """The group of a ``LockBatchRequestBody``/``UnlockBatchRequestBody``: its lock table."""

    def needs(request: RemotingCommand) -> Needs:
        group, _client_id, _queues = lock_body(request, what)
        return [(group_resource(group), Perm.SUB)]

    return needs


def _consume_stats(request: RemotingCommand) -> Needs:
    header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
    needs: Needs = [(group_resource(header.consumer_group), Perm.SUB)]
    if header.topic:
        needs.append((topic_resource(header.topic), Perm.SUB))
    return needs


_RULES: dict[int, Callable[[RemotingCommand], Needs]] = {
    RequestCode.SEND_MESSAGE: _send,
    RequestCode.SEND_MESSAGE_V2: _send,
    RequestCode.SEND_BATCH_MESSAGE: _send,
    RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
    RequestCode.PULL_MESSAGE: _pull,
    RequestCode.QUERY_MESSAGE: _topic(QueryMessageRequestHeader),
    RequestCode.QUERY_CONSUMER_OFFSET: _group_and_topic(QueryConsumerOffsetRequestHeader),
    RequestCode.UPDATE_CONSUMER_OFFSET: _group_and_topic(UpdateConsumerOffsetRequestHeader),
    RequestCode.ACK_QUEUE_OFFSETS: _group_and_topic(QueryConsumerOffsetRequestHeader),
    RequestCode.QUERY_ACKED_OFFSETS: _group_and_topic(QueryConsumerOffsetRequestHeader),
    RequestCode.GET_MAX_OFFSET: _topic(GetMaxOffsetRequestHeader),
    RequestCode.GET_MIN_OFFSET: _topic(GetMinOffsetRequestHeader),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _topic(SearchOffsetRequestHeader),
    RequestCode.GET_EARLIEST_MSG_STORETIME: _topic(GetEarliestMsgStoretimeRequestHeader),
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _unregister,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _consumer_group(GetConsumerListByGroupRequestHeader),
    RequestCode.LOCK_BATCH_MQ: _lock("LockBatchRequestBody"),
    RequestCode.UNLOCK_BATCH_MQ: _lock("UnlockBatchRequestBody"),
    RequestCode.GET_CONSUME_STATS: _consume_stats,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _topic(QueryTopicConsumeByWhoRequestHeader),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: _consumer_group(
        GetConsumerConnectionListRequestHeader
    ),
}

RESOURCE_CODES: frozenset[int] = frozenset(_RULES)
"""Requests whose topics and groups :func:`required` names."""


def required(request: RemotingCommand) -> Needs:
    """The (resource, permission) pairs ``request`` needs, groups as ``%RETRY%<group>``;
    empty for admin and signature-only codes (and for codes the broker does not serve). Reads
    headers and bodies with the parsers their handlers use, so the check and the handler
    agree on what the request touches; raises :class:`InvalidArgumentError` (as the handler
    would) when they do not parse."""
    rule = _RULES.get(request.code)
    return [] if rule is None else rule(request)


BROKER_RULES = Rules(admin_codes=ADMIN_CODES, required=required)
"""The broker's table, for :class:`~reconsume.access.guard.AclGuard`."""
