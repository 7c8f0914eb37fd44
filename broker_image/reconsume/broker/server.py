"""The broker: a remoting server over one message store, registered with the name servers.

Request handlers live in their own modules (send, pull, offsets, clients, admin); this module
wires them to request codes, starts and stops the parts in order, and runs the housekeeping
RocketMQ's ``ClientHousekeepingService`` does (closing clients silent for two minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable
from typing import Any

from reconsume.broker.admin import AdminProcessor
from reconsume.broker.clients import ClientProcessor
from reconsume.broker.context import BrokerContext
from reconsume.broker.offsets import OffsetProcessor
from reconsume.broker.pull import PullProcessor
from reconsume.broker.registration import Registrar
from reconsume.broker.send import SendProcessor
from reconsume.broker.settings import BrokerSettings
from reconsume.errors import InvalidArgumentError
from reconsume.store import MessageStore
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection, Dispatcher, Handler, HandlerResult, RemotingServer

log = logging.getLogger(__name__)

CLIENT_MAX_IDLE_S = 120.0
"""A client connection without a heartbeat for this long is closed (RocketMQ's
``channelExpiredTimeout``)."""
HOUSEKEEPING_INTERVAL_S = 10.0


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
        if inspect.isawaitable(result):
            return finish(request, result)
        return result

    return run


class Broker:
    """One broker process: call :meth:`start`, then :meth:`stop` (from the same event loop)."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.dispatcher = Dispatcher("broker")
        self.server = RemotingServer(self.dispatcher)
        self.address = ""
        """The advertised ``ip:port``, once started."""
        self._store: MessageStore | None = None
        self._context: BrokerContext | None = None
        self._registrar: Registrar | None = None
        self._housekeeping: asyncio.Task[None] | None = None

    @property
    def context(self) -> BrokerContext:
        if self._context is None:
            raise RuntimeError("the broker is not started")
        return self._context

    async def start(self) -> str:
        """Listen, open (and recover) the store, register; returns the advertised address."""
        settings = self.settings
        port = await self.server.start(settings.listen_host, settings.listen_port)
        store_host = settings.advertised(port)
        try:
            # Opened after binding: with port 0 the store host (in every record and offset
            # message id) must carry the port actually bound. No request is handled before the
            # handlers below exist, since nothing awaits in between.
            store = MessageStore(
                settings.store_dir, settings.store_settings(), store_host=store_host
            )
        except BaseException:
            await self.server.stop()
            raise
        self._store = store
        self.address = str(store_host)
        registrar = Registrar(
            namesrv_addresses=settings.namesrv_addresses,
            broker_name=settings.broker_name,
            broker_addr=self.address,
            cluster_name=settings.cluster_name,
            broker_id=settings.broker_id,
            interval_s=settings.register_interval_s,
            topic_wrapper=self._topic_wrapper,
        )
        self._registrar = registrar
        context = BrokerContext(settings, store, store_host, registrar.topics_changed)
        self._context = context
        context.prepare_default_topic()
        self._register_handlers(context)
        self.server.on_disconnect.append(context.consumers.connection_closed)
        registrar.start()
        self._housekeeping = asyncio.create_task(self._housekeep(), name="broker-housekeeping")
        log.info(
            "broker %s of cluster %s listening on %s:%d as %s, store %s (%s flush)",
            settings.broker_name,
            settings.cluster_name,
            settings.listen_host,
            port,
            self.address,
            settings.store_dir,
            settings.flush_mode,
        )
        return self.address

    def _topic_wrapper(self) -> dict[str, Any]:
        """``TopicConfigSerializeWrapper``: the topic table and its data version."""
        context = self.context
        return {
            "topicConfigTable": {
                name: config.to_dict() for name, config in context.store.topics.items()
            },
            "dataVersion": context.topic_data_version(),
        }

    def _register_handlers(self, context: BrokerContext) -> None:
        send = SendProcessor(context)
        pull = PullProcessor(context)
        offsets = OffsetProcessor(context)
        clients = ClientProcessor(context)
        admin = AdminProcessor(context)
        handlers: dict[int, Handler] = {
            RequestCode.SEND_MESSAGE: send.send,
            RequestCode.SEND_MESSAGE_V2: send.send,
            RequestCode.SEND_BATCH_MESSAGE: send.send,
            RequestCode.PULL_MESSAGE: pull.pull,
            RequestCode.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
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
        }
        for code, handler in handlers.items():
            self.dispatcher.register(code, guarded(handler))

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            for connection in self.context.consumers.idle_connections(
                time.monotonic(), CLIENT_MAX_IDLE_S
            ):
                log.warning("closing %s: no heartbeat for %gs", connection.peer, CLIENT_MAX_IDLE_S)
                connection.close()

    async def stop(self) -> None:
        """Stop accepting, unregister from the name servers, close client connections (held
        pulls end with them), then flush and close the store (tables persisted)."""
        self.server.stop_accepting()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
            self._housekeeping = None
        if self._registrar is not None:
            await self._registrar.close()
            self._registrar = None
        await self.server.stop()
        if self._store is not None:
            self._store.close()
            self._store = None
        log.info("broker %s stopped", self.settings.broker_name)
