"""A small test client for the broker: one method per request, built on the wire transport and
headers (no reconsume.client). Records NOTIFY_CONSUMER_IDS_CHANGED requests it receives."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from reconsume.message import StoredMessage, iter_records
from reconsume.message.batch import BatchItem, encode_batch
from reconsume.message.names import DEFAULT_TOPIC
from reconsume.message.properties import encode_properties
from reconsume.wire.broker_headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.headers import GetRouteInfoRequestHeader
from reconsume.wire.transport import Connection

from ..polling import eventually_async

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4


def ok(response: RemotingCommand) -> RemotingCommand:
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    return response


def records(response: RemotingCommand) -> list[StoredMessage]:
    return list(iter_records(response.body, verify_crc=True))


eventually = eventually_async
""":func:`tests.polling.eventually_async` under the name the integration, compat and Spark
tests import it by, beside the client they poll with."""


class BrokerClient:
    def __init__(self) -> None:
        dispatcher = Dispatcher("test-client")
        dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._notified)
        self.remoting = RemotingClient(dispatcher)
        self.notifications: list[str] = []
        self.notified = asyncio.Event()

    def _notified(self, request: RemotingCommand, connection: Connection) -> None:
        self.notifications.append(request.ext_fields.get("consumerGroup", ""))
        self.notified.set()

    async def __aenter__(self) -> BrokerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.remoting.close()

    async def invoke(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        timeout_s: float = 5.0,
    ) -> RemotingCommand:
        return await self.remoting.invoke(addr, RemotingCommand.request(code, ext, body), timeout_s)

    # ------------------------------------------------------------------ send
    async def send(
        self,
        addr: str,
        topic: str,
        body: bytes,
        *,
        queue_id: int = 0,
        properties: dict[str, str] | None = None,
        v2: bool = True,
        default_topic: str = DEFAULT_TOPIC,
        default_queues: int = 4,
        reconsume_times: int | None = None,
    ) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="test-producer",
            topic=topic,
            default_topic=default_topic,
            default_topic_queue_nums=default_queues,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=encode_properties(properties or {}),
            reconsume_times=reconsume_times,
        )
        if v2:
            ext = SendMessageRequestHeaderV2.from_v1(header).to_ext_fields()
            return await self.invoke(addr, RequestCode.SEND_MESSAGE_V2, ext, body)
        return await self.invoke(addr, RequestCode.SEND_MESSAGE, header.to_ext_fields(), body)

    async def send_batch(
        self,
        addr: str,
        topic: str,
        messages: Sequence[tuple[bytes, dict[str, str]]],
        *,
        queue_id: int = 0,
        raw_body: bytes | None = None,
    ) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="test-producer",
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=encode_properties({"WAIT": "true"}),
            batch=True,
        )
        body = raw_body
        if body is None:
            body = encode_batch([BatchItem(7, b, encode_properties(p)) for b, p in messages])
        ext = SendMessageRequestHeaderV2.from_v1(header).to_ext_fields()
        return await self.invoke(addr, RequestCode.SEND_BATCH_MESSAGE, ext, body)

    # ------------------------------------------------------------------ pull
    def pull_request(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        subscription: str | None = "*",
        suspend_ms: int = 0,
        commit_offset: int | None = None,
        bulk: bool = False,
    ) -> RemotingCommand:
        flags = FLAG_SUBSCRIPTION if subscription is not None else 0
        flags |= FLAG_SUSPEND if suspend_ms else 0
        flags |= FLAG_COMMIT_OFFSET if commit_offset is not None else 0
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=flags,
            commit_offset=commit_offset or 0,
            suspend_timeout_millis=suspend_ms,
            subscription=subscription,
            sub_version=0,
            expression_type="TAG",
            bulk=bulk or None,
        )
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())

    async def pull(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int, **kwargs: Any
    ) -> RemotingCommand:
        request = self.pull_request(group, topic, queue_id, offset, **kwargs)
        timeout_s = kwargs.get("suspend_ms", 0) / 1000 + 5
        return await self.remoting.invoke(addr, request, timeout_s)

    async def send_back(
        self,
        addr: str,
        group: str,
        offset: int,
        *,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
        origin_topic: str | None = None,
    ) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK of the message at commit-log ``offset``."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=offset,
            group=group,
            delay_level=delay_level,
            origin_topic=origin_topic,
            max_reconsume_times=max_reconsume_times,
        )
        return await self.invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())

    # ------------------------------------------------------------------ offsets
    async def query_offset(
        self, addr: str, group: str, topic: str, queue_id: int
    ) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id
        )
        return await self.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())

    async def update_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        )
        return await self.invoke(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())

    async def queue_offset(
        self, addr: str, code: int, topic: str, queue_id: int, **extra: int
    ) -> int:
        header: Any
        if code == RequestCode.GET_MAX_OFFSET:
            header = GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id)
        elif code == RequestCode.GET_MIN_OFFSET:
            header = GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id)
        elif code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            header = SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, **extra)
        else:
            header = GetEarliestMsgStoretimeRequestHeader(topic=topic, queue_id=queue_id)
        response = ok(await self.invoke(addr, code, header.to_ext_fields()))
        return int(response.ext_fields.get("offset", response.ext_fields.get("timestamp", "")))

    # ------------------------------------------------------------------ clients
    async def heartbeat(
        self, addr: str, client_id: str, group: str, subscriptions: dict[str, str]
    ) -> RemotingCommand:
        body = {
            "clientID": client_id,
            "producerDataSet": [{"groupName": "test-producer"}],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "topic": topic,
                            "subString": expression,
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": int(time.time() * 1000),
                            "expressionType": "TAG",
                        }
                        for topic, expression in subscriptions.items()
                    ],
                }
            ],
        }
        return await self.invoke(addr, RequestCode.HEART_BEAT, None, json.dumps(body).encode())

    async def unregister(self, addr: str, client_id: str, group: str) -> RemotingCommand:
        header = UnregisterClientRequestHeader(client_id=client_id, consumer_group=group)
        return await self.invoke(addr, RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())

    async def consumer_list(self, addr: str, group: str) -> list[str] | None:
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self.invoke(
            addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields()
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return sorted(json.loads(response.body)["consumerIdList"])

    async def lock(
        self,
        addr: str,
        group: str,
        client_id: str,
        queues: Sequence[tuple[str, str, int]],
        *,
        unlock: bool = False,
    ) -> list[tuple[str, str, int]]:
        body = {
            "consumerGroup": group,
            "clientId": client_id,
            "onlyThisBroker": False,
            "mqSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in queues],
        }
        code = RequestCode.UNLOCK_BATCH_MQ if unlock else RequestCode.LOCK_BATCH_MQ
        response = ok(await self.invoke(addr, code, None, json.dumps(body).encode()))
        if unlock:
            return []
        held = json.loads(response.body)["lockOKMQSet"]
        return sorted((mq["topic"], mq["brokerName"], mq["queueId"]) for mq in held)

    # ------------------------------------------------------------------ admin
    async def create_topic(
        self, addr: str, topic: str, queues: int, perm: int = 6
    ) -> RemotingCommand:
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            topic_sys_flag=0,
            order=False,
        )
        return await self.invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())

    async def delete_topic(self, addr: str, topic: str) -> RemotingCommand:
        header = DeleteTopicRequestHeader(topic=topic)
        return await self.invoke(addr, RequestCode.DELETE_TOPIC_IN_BROKER, header.to_ext_fields())

    async def topics(self, addr: str) -> dict[str, Any]:
        response = ok(await self.invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        document: dict[str, Any] = json.loads(response.body)
        return document

    async def create_group(self, addr: str, config: dict[str, Any]) -> RemotingCommand:
        body = json.dumps(config).encode()
        return await self.invoke(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)

    async def delete_group(self, addr: str, group: str, remove_offset: bool) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset)
        return await self.invoke(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header.to_ext_fields())

    async def groups(self, addr: str) -> dict[str, Any]:
        response = ok(await self.invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        document: dict[str, Any] = json.loads(response.body)
        return document

    async def view(self, addr: str, offset: int) -> RemotingCommand:
        header = ViewMessageRequestHeader(offset=offset)
        return await self.invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext_fields())

    # ------------------------------------------------------------------ name server
    async def route(self, namesrv: str, topic: str) -> dict[str, Any] | None:
        header = GetRouteInfoRequestHeader(topic=topic)
        response = await self.invoke(
            namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields()
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        document: dict[str, Any] = json.loads(response.body)
        return document
