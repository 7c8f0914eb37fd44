"""The admin client: topics, subscription groups, offsets, consumers and queue depths.

What ``mqadmin`` does for RocketMQ, as a library for the operator, the dead-letter jobs and
scripts. Cluster-wide operations go to the master of every broker of a cluster (all
clusters when none is named), as ``mqadmin updateTopic -c`` does::

    async with AdminClient(["127.0.0.1:9876"]) as admin:
        await admin.create_topic("orders", queues=8)
        for progress in await admin.consumer_progress("orders-consumer", "orders"):
            print(progress.queue, progress.lag)
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconsume.client.acked import Acked, query_acked
from reconsume.client.broker_api import BrokerApi
from reconsume.client.namesrv import RouteCache
from reconsume.client.routes import MessageQueue, TopicRoute
from reconsume.errors import InvalidArgumentError, RemotingError
from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig, TopicConfig
from reconsume.message.names import (
    DEFAULT_TOPIC,
    is_dead_letter_topic,
    validate_group,
    validate_topic,
)
from reconsume.wire import fastjson
from reconsume.wire.broker_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.headers import DeleteTopicFromNamesrvRequestHeader
from reconsume.wire.signing import Signing, signer_or_environment
from reconsume.wire.tls import tls_or_environment


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    name: str
    cluster: str
    master: str | None
    addresses: dict[int, str]


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a topic as a group sees it (a row of ``mqadmin consumerProgress``)."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    consumer_offset: int
    """-1 when the group has committed nothing for this queue."""

    @property
    def depth(self) -> int:
        """Messages stored in the queue."""
        return self.max_offset - self.min_offset

    @property
    def lag(self) -> int:
        """Messages the group has still to consume."""
        start = self.consumer_offset if self.consumer_offset >= 0 else self.min_offset
        return max(0, self.max_offset - max(start, self.min_offset))


class AdminClient:
    def __init__(
        self,
        name_servers: Sequence[str],
        *,
        timeout_s: float = 3.0,
        credentials: Signing | None = None,
        tls: bool | ssl.SSLContext | None = None,
    ) -> None:
        """Administration of the brokers ``name_servers`` list.
        ``credentials`` (``Credentials``, or ``CredentialFiles`` of a mounted Secret) sign every
        request (servers with access control on refuse unsigned ones); None: those of the
        environment (``RECONSUME_CREDENTIALS_DIR``, else ``RECONSUME_ACCESS_KEY`` and
        ``RECONSUME_SECRET_KEY``) when set, else unsigned.
                ``tls``: True (TLS, trusting ``RECONSUME_TLS_CA_FILE``, else the system's CAs), an
        ``ssl.SSLContext``, False (plaintext); None: as ``RECONSUME_TLS`` says.
        """
        self._name_servers = list(name_servers)
        self._client = RemotingClient(
            signer=signer_or_environment(credentials), tls=tls_or_environment(tls)
        )
        self._api = BrokerApi(self._client, timeout_s)
        self._routes = RouteCache(self._client, self._name_servers, ttl_s=1.0, timeout_s=timeout_s)

    @property
    def broker_api(self) -> BrokerApi:
        """Requests to one broker by address (offsets, pulls), on this client's connections."""
        return self._api

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------------ cluster
    async def _namesrv(self, code: int, fields: dict[str, str] | None = None) -> bytes:
        last: RemotingError | None = None
        for address in self._name_servers:
            try:
                response = await self._api.checked(address, code, fields, what="name server")
            except RemotingError as exc:
                last = exc
                continue
            return response.body
        assert last is not None
        raise last

    async def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        """The brokers registered with the name servers (of ``cluster``), by name."""
        document = fastjson.loads(await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))
        table: dict[str, Any] = document.get("brokerAddrTable") or {}
        names = None
        if cluster is not None:
            names = set((document.get("clusterAddrTable") or {}).get(cluster) or ())
        found: list[BrokerInfo] = []
        for name, data in sorted(table.items()):
            if names is not None and name not in names:
                continue
            addresses = {int(k): str(v) for k, v in (data.get("brokerAddrs") or {}).items()}
            found.append(
                BrokerInfo(name, str(data.get("cluster", "")), addresses.get(0), addresses)
            )
        return found

    async def _masters(self, cluster: str | None) -> list[str]:
        masters = [b.master for b in await self.brokers(cluster) if b.master]
        if not masters:
            where = f"cluster {cluster}" if cluster else "any cluster"
            raise RemotingError(f"no broker master registered in {where}")
        return masters

    async def topics(self) -> list[str]:
        """Every topic the name servers route."""
        body = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(str(t) for t in json.loads(body).get("topicList") or [])

    async def route(self, topic: str) -> TopicRoute | None:
        return await self._routes.get(topic, refresh=True)

    # ------------------------------------------------------------------ topics
    async def create_topic(
        self,
        topic: str,
        *,
        queues: int = 8,
        perm: int = PERM_READ_WRITE,
        order: bool = False,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]:
        """Create or update ``topic`` with ``queues`` read and write queues on each broker;
        returns the broker addresses it was applied to."""
        validate_topic(topic)
        if not 0 < queues <= 1024:
            raise InvalidArgumentError(f"queues must be in 1..1024, not {queues}")
        config = TopicConfig(topic, queues, queues, perm, order=order)
        return await self.update_topic(config, cluster=cluster, brokers=brokers)

    async def update_topic(
        self,
        config: TopicConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]:
        """Create or update a topic with the read and write queue counts, permission and
        flags of ``config`` (``mqadmin updateTopic -r -w -p``) on each broker (the masters of
        ``cluster``, or ``brokers``); returns the addresses it was applied to. A reconsume
        broker keeps a retry topic's queues being removed readable until drained."""
        validate_topic(config.topic_name)
        header = CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=DEFAULT_TOPIC,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
        )
        targets = list(brokers) if brokers is not None else await self._masters(cluster)
        for address in targets:
            await self._api.checked(
                address,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                header.to_ext_fields(),
                what=f"create topic {config.topic_name} on {address}",
            )
        return targets

    async def delete_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> None:
        """Delete ``topic`` from the brokers (the masters of ``cluster``), then from the name
        servers' routes. With ``brokers`` (addresses), only from those brokers: the name
        servers drop their queues when they next register (a reconsume broker does at once;
        see :meth:`delete_topic_route` for RocketMQ's)."""
        header = DeleteTopicRequestHeader(topic=topic)
        targets = list(brokers) if brokers is not None else await self._masters(cluster)
        for address in targets:
            await self._api.checked(
                address,
                RequestCode.DELETE_TOPIC_IN_BROKER,
                header.to_ext_fields(),
                what=f"delete topic {topic} on {address}",
            )
        if brokers is None:
            await self.delete_topic_route(topic, cluster=cluster)

    async def delete_topic_route(self, topic: str, *, cluster: str | None = None) -> None:
        """Remove ``topic``'s route (its queues on the brokers of ``cluster``, else all of it)
        from every name server."""
        fields = DeleteTopicFromNamesrvRequestHeader(topic, cluster).to_ext_fields()
        for address in self._name_servers:
            await self._api.checked(
                address, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, what="delete route"
            )

    async def topic_configs(self, broker: str) -> dict[str, TopicConfig]:
        response = await self._api.checked(broker, RequestCode.GET_ALL_TOPIC_CONFIG, what="topics")
        table = json.loads(response.body).get("topicConfigTable") or {}
        return {name: TopicConfig.from_dict(data) for name, data in table.items()}

    # ------------------------------------------------------------------ groups
    async def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
    ) -> list[str]:
        validate_group(config.group_name)
        body = json.dumps(config.to_dict()).encode()
        targets = list(brokers) if brokers is not None else await self._masters(cluster)
        for address in targets:
            await self._api.checked(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                body,
                what=f"create group {config.group_name} on {address}",
            )
        return targets

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        brokers: Sequence[str] | None = None,
        remove_offsets: bool = True,
    ) -> None:
        """Delete the group's subscription config (and its consumer offsets) on each broker
        (the masters of ``cluster``, or ``brokers``)."""
        header = DeleteSubscriptionGroupRequestHeader(
            group_name=group, remove_offset=remove_offsets
        )
        targets = list(brokers) if brokers is not None else await self._masters(cluster)
        for address in targets:
            await self._api.checked(
                address,
                RequestCode.DELETE_SUBSCRIPTIONGROUP,
                header.to_ext_fields(),
                what=f"delete group {group} on {address}",
            )

    async def group_configs(self, broker: str) -> dict[str, SubscriptionGroupConfig]:
        response = await self._api.checked(
            broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, what="groups"
        )
        table = json.loads(response.body).get("subscriptionGroupTable") or {}
        return {name: SubscriptionGroupConfig.from_dict(data) for name, data in table.items()}

    async def consumer_ids(self, group: str, *, cluster: str | None = None) -> list[str]:
        """The client ids of the group's consumers connected to any broker."""
        ids: set[str] = set()
        for address in await self._masters(cluster):
            ids.update(await self._api.consumer_ids(address, group))
        return sorted(ids)

    async def topic_groups(self, broker: str, topic: str) -> list[str]:
        """The groups that consume ``topic`` on one broker (an address): those online with a
        subscription to it and those with committed offsets in it (``QUERY_TOPIC_CONSUME_BY_WHO``,
        what ``mqadmin topicList -c`` asks)."""
        header = QueryTopicConsumeByWhoRequestHeader(topic=topic)
        response = await self._api.checked(
            broker,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
            header.to_ext_fields(),
            what=f"groups of {topic} on {broker}",
        )
        document = fastjson.loads(response.body) if response.body else {}
        return sorted(str(g) for g in document.get("groupList") or [])

    # ------------------------------------------------------------------ offsets
    async def _broker_of(self, queue: MessageQueue) -> str:
        route = await self._routes.get(queue.topic)
        address = route.reader_of(queue.broker_name) if route is not None else None
        if address is None:
            raise RemotingError(f"topic {queue.topic} has no broker {queue.broker_name}")
        return address

    async def consumer_offset(self, group: str, queue: MessageQueue) -> int:
        """The group's committed offset of ``queue``; -1 when it has none."""
        return await self._committed_offset(await self._broker_of(queue), group, queue)

    async def update_consumer_offset(self, group: str, queue: MessageQueue, offset: int) -> None:
        """Set the group's committed offset (reset progress; consumers pick it up when the queue
        is next assigned)."""
        await self.set_committed_offset_at(await self._broker_of(queue), group, queue, offset)

    async def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        """Per queue of ``topic``: stored range and the group's committed offset."""
        route = await self._routes.get(topic, refresh=True)
        if route is None:
            raise RemotingError(f"no name server knows topic {topic}")
        rows: list[QueueProgress] = []
        for queue in route.read_queues:
            address = await self._broker_of(queue)
            rows.append(
                QueueProgress(
                    queue,
                    await self._api.min_offset(address, queue),
                    await self._api.max_offset(address, queue),
                    await self.consumer_offset(group, queue),
                )
            )
        return rows

    async def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int:
        """Messages in queues ``0..queues-1`` of ``topic`` on one broker (an address): those
        stored (max - min offset), or with ``group`` those the group has not consumed yet (max
        offset - its committed offset, the min offset when it has none or one below it; of a
        dead-letter topic, less what the group acknowledged past its committed offset)."""
        total = 0
        for queue_id in range(queues):
            queue = MessageQueue(topic, "", queue_id)
            high = await self._api.max_offset(broker, queue)
            low = await self._api.min_offset(broker, queue)
            if group is not None and is_dead_letter_topic(topic):
                acked = await query_acked(self._api, broker, group, queue)
                if acked is not None:  # what jobs handled past a dead letter they kept
                    total += Acked(max(low, acked.committed), acked.ranges).backlog(high)
                    continue
            if group is not None:
                low = max(low, await self._committed_offset(broker, group, queue))
            total += max(0, high - low)
        return total

    async def set_committed_offset_at(
        self, broker: str, group: str, queue: MessageQueue, offset: int
    ) -> None:
        """Set the group's committed offset of ``queue`` on the broker at address ``broker``
        (no route needed: for topics a name server may not route yet)."""
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=queue.topic, queue_id=queue.queue_id, commit_offset=offset
        )
        await self._api.checked(
            broker,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            header.to_ext_fields(),
            what=f"offset of {group} on {queue}",
        )

    async def committed_offset_at(self, broker: str, group: str, queue: MessageQueue) -> int:
        """The group's committed offset of ``queue`` on the broker at address ``broker``; -1
        when it has none."""
        return await self._committed_offset(broker, group, queue)

    async def _committed_offset(self, broker: str, group: str, queue: MessageQueue) -> int:
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=queue.topic, queue_id=queue.queue_id
        )
        response = await self._api.call(
            broker, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields()
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if response.code != ResponseCode.SUCCESS:
            raise RemotingError(f"offset of {group} on {queue} at {broker}: {response.remark}")
        return QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def topic_depth(self, topic: str) -> int:
        """Messages stored in ``topic`` over all its queues (0 when nobody routes it)."""
        route = await self._routes.get(topic, refresh=True)
        if route is None:
            return 0
        total = 0
        for queue in route.read_queues:
            address = await self._broker_of(queue)
            total += await self._api.max_offset(address, queue)
            total -= await self._api.min_offset(address, queue)
        return total
