"""Which processor answers which request code on every broker, and how a handler's refusal of
a request it cannot read is answered. A role adds its own handlers or replaces some of these
(:class:`~reconsume.broker.failover.RoleKeeper`); each is registered wrapped in
:func:`guarded`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable

from reconsume.broker.acked_offsets import AckedOffsetsProcessor
from reconsume.broker.admin import AdminProcessor
from reconsume.broker.admin_stats import AdminStatsProcessor
from reconsume.broker.clients import ClientProcessor
from reconsume.broker.context import BrokerContext
from reconsume.broker.offsets import OffsetProcessor
from reconsume.broker.pull import PullProcessor
from reconsume.broker.runtime_info import BrokerInfoProcessor, Throughput
from reconsume.broker.send import SendProcessor
from reconsume.broker.send_back import SendBackProcessor
from reconsume.errors import InvalidArgumentError
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Handler, HandlerResult
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)


def base_handlers(
    context: BrokerContext,
    throughput: Throughput,
    acl_digest: Callable[[], str | None],
    grpc_address: Callable[[], str | None],
) -> dict[int, Handler]:
    """Every broker's handlers, by request code."""
    send = SendProcessor(context)
    send_back = SendBackProcessor(context)
    pull = PullProcessor(context)
    offsets = OffsetProcessor(context)
    acked = AckedOffsetsProcessor(context)
    clients = ClientProcessor(context)
    admin = AdminProcessor(context)
    admin_stats = AdminStatsProcessor(context, throughput)
    info = BrokerInfoProcessor(context, throughput, acl_digest, grpc_address)
    return {
        RequestCode.SEND_MESSAGE: send.send,
        RequestCode.SEND_MESSAGE_V2: send.send,
        RequestCode.SEND_BATCH_MESSAGE: send.send,
        RequestCode.CONSUMER_SEND_MSG_BACK: send_back.send_back,
        RequestCode.PULL_MESSAGE: pull.pull,
        RequestCode.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
        RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
        RequestCode.ACK_QUEUE_OFFSETS: acked.ack,
        RequestCode.QUERY_ACKED_OFFSETS: acked.query,
        RequestCode.GET_MAX_OFFSET: offsets.max_offset,
        RequestCode.GET_MIN_OFFSET: offsets.min_offset,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset,
        RequestCode.GET_EARLIEST_MSG_STORETIME: offsets.earliest_store_time,
        RequestCode.HEART_BEAT: clients.heartbeat,
        RequestCode.UNREGISTER_CLIENT: clients.unregister,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
        RequestCode.LOCK_BATCH_MQ: clients.lock_batch,
        RequestCode.UNLOCK_BATCH_MQ: clients.unlock_batch,
        RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_topics,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.create_group,
        RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_group,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_groups,
        RequestCode.VIEW_MESSAGE_BY_ID: admin.view_message,
        RequestCode.GET_CONSUME_STATS: admin_stats.consume_stats,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: admin_stats.consumed_by,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: admin_stats.connections,
        RequestCode.GET_BROKER_RUNTIME_INFO: info.runtime_info,
        RequestCode.GET_BROKER_CONFIG: info.broker_config,
    }


def _bad_request(request: RemotingCommand, exc: InvalidArgumentError) -> RemotingCommand:
    log.info("%s refused: %s", request.describe(), exc)
    return request.respond(ResponseCode.SYSTEM_ERROR, str(exc))


def guarded(handler: Handler) -> Handler:
    """Answer a request the handler rejects as invalid (a missing header field, a bad body)
    with SYSTEM_ERROR and the reason, as RocketMQ answers a ``RemotingCommandException``,
    without logging a traceback; other failures reach the transport's SYSTEM_ERROR path."""

    async def finish(request: RemotingCommand, pending: Awaitable[HandlerResult]) -> HandlerResult:
        try:
            return await pending
        except InvalidArgumentError as exc:
            return _bad_request(request, exc)

    def run(
        request: RemotingCommand, connection: Connection
    ) -> HandlerResult | Awaitable[HandlerResult]:
        try:
            result = handler(request, connection)
        except InvalidArgumentError as exc:
            return _bad_request(request, exc)
        if (
            result is not None
            and not isinstance(result, RemotingCommand)
            and inspect.isawaitable(result)
        ):
            return finish(request, result)
        return result

    return run
