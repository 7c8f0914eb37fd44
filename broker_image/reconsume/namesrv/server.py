"""The name server: brokers register here, clients ask it for topic routes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from reconsume.access.guard import AclGuard
from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import TopicConfig
from reconsume.namesrv.access import NAMESRV_RULES
from reconsume.namesrv.routes import MASTER_ID, RouteTable
from reconsume.namesrv.settings import NamesrvSettings
from reconsume.wire import fastjson
from reconsume.wire.codes import VERSION_4_9_4, RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingServer
from reconsume.wire.headers import (
    EPOCH_FIELD,
    STABLE_ADDRESS_FIELD,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from reconsume.wire.listen import listen_text
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)


def _topics_from_body(body: bytes) -> tuple[dict[str, TopicConfig] | None, Any]:
    """Topic configs and data version of a REGISTER_BROKER body (RocketMQ's
    ``RegisterBrokerBody``); (None, None) for an empty body."""
    if not body:
        return None, None
    try:
        document = json.loads(body)
        wrapper = document.get("topicConfigSerializeWrapper") or {}
        table = wrapper.get("topicConfigTable") or {}
        topics = {name: TopicConfig.from_dict(config) for name, config in table.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"register body is not a RegisterBrokerBody: {exc}") from exc
    return topics, wrapper.get("dataVersion")


class NameServer:
    def __init__(self, settings: NamesrvSettings | None = None) -> None:
        self.settings = settings or NamesrvSettings()
        self.routes = RouteTable()
        self.kv: dict[str, dict[str, str]] = {}
        dispatcher = Dispatcher("namesrv")
        for code, handler in {
            RequestCode.REGISTER_BROKER: self._register,
            RequestCode.UNREGISTER_BROKER: self._unregister,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            RequestCode.GET_KV_CONFIG: self._get_kv,
            RequestCode.PUT_KV_CONFIG: self._put_kv,
            RequestCode.DELETE_KV_CONFIG: self._delete_kv,
        }.items():
            dispatcher.register(code, handler)
        self.guard: AclGuard | None = None
        if self.settings.acl_file is not None:
            self.guard = dispatcher.guard = AclGuard(
                self.settings.acl_file, NAMESRV_RULES, "name server"
            )
        self.server = RemotingServer(dispatcher, tls=self.settings.tls())
        self.server.on_disconnect.append(self._connection_closed)
        self._scanner: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> int:
        self.port = await self.server.start(self.settings.listen_host, self.settings.listen_port)
        self._scanner = asyncio.create_task(self._scan_forever())
        if self.guard is not None:
            self.guard.start()
        log.info(
            "name server listening on %s (TLS %s)",
            listen_text(self.settings.listen_host, self.port),
            self.settings.tls_mode,
        )
        return self.port

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
        if self.guard is not None:
            await self.guard.stop()
        await self.server.stop()

    async def _scan_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.scan_interval_s)
            for addr in self.routes.expire(time.monotonic(), self.settings.broker_expiry_s):
                log.warning(
                    "broker %s expired: no registration for %gs",
                    addr,
                    self.settings.broker_expiry_s,
                )

    def _connection_closed(self, connection: Connection) -> None:
        for addr in self.routes.addresses_of_connection(id(connection)):
            log.info("broker %s disconnected; removing its routes", addr)
            self.routes.remove_address(addr)

    # ------------------------------------------------------------------ handlers
    def _register(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        if header.compressed:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, "compressed broker registration is not supported"
            )
        topics, data_version = _topics_from_body(request.body)
        if header.broker_id == MASTER_ID:
            epoch = _epoch(request)
            stale = self.routes.stale_master(
                header.broker_name, header.broker_addr, epoch, stable=_stable(request)
            )
            if stale is not None:
                log.warning("refused a registration: %s", stale)
                return request.respond(ResponseCode.SYSTEM_ERROR, stale)
        result = self.routes.register(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topics=topics,
            data_version=data_version,
            now_s=time.monotonic(),
            # a stable address outlives this connection: kept when it closes
            connection_id=None if _stable(request) else id(connection),
        )
        response = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        return request.respond(ext_fields=response.to_ext_fields(), body=b'{"table":{}}')

    def _unregister(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = UnregisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        if header.broker_id == MASTER_ID and self.routes.newer_master(
            header.broker_name, _epoch(request)
        ):
            log.info(
                "kept %s of broker %s: a master newer than epoch %d registered it",
                header.broker_addr,
                header.broker_name,
                _epoch(request),
            )
            return request.respond()
        self.routes.unregister(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
        )
        return request.respond()

    def _route(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.routes.route(header.topic)
        if route is None:
            return request.respond(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        standard = request.version >= VERSION_4_9_4 or bool(header.accept_standard_json_only)
        if order_conf := self.kv.get("ORDER_TOPIC_CONFIG", {}).get(header.topic):
            route["orderTopicConf"] = order_conf
        return request.respond(body=fastjson.dumps(route, standard=standard).encode())

    def _cluster_info(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        standard = request.version >= VERSION_4_9_4
        body = fastjson.dumps(self.routes.cluster_info(), standard=standard)
        return request.respond(body=body.encode())

    def _topic_list(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        body = json.dumps({"topicList": self.routes.topic_names()})
        return request.respond(body=body.encode())

    def _topics_by_cluster(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        body = json.dumps({"topicList": self.routes.topic_names(header.cluster)})
        return request.respond(body=body.encode())

    def _delete_topic(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.delete_topic(header.topic, header.cluster_name)
        return request.respond()

    def _get_kv(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv.get(header.namespace, {}).get(header.key)
        if value is None:
            return request.respond(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return request.respond(ext_fields=GetKVConfigResponseHeader(value).to_ext_fields())

    def _put_kv(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        ext = request.ext_fields
        if not ext.get("namespace") or not ext.get("key") or "value" not in ext:
            return request.respond(
                ResponseCode.SYSTEM_ERROR, "namespace, key and value are required"
            )
        self.kv.setdefault(ext["namespace"], {})[ext["key"]] = ext["value"]
        return request.respond()

    def _delete_kv(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.get(header.namespace, {}).pop(header.key, None)
        return request.respond()


def _stable(request: RemotingCommand) -> bool:
    return request.ext_fields.get(STABLE_ADDRESS_FIELD) == "true"


def _epoch(request: RemotingCommand) -> int:
    """The master epoch a failover-run broker registers with (0: none, or not a number)."""
    raw = request.ext_fields.get(EPOCH_FIELD, "0")
    return int(raw) if raw.isdigit() else 0
