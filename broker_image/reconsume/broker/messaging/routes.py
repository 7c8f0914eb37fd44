"""QueryRoute and QueryAssignment: a topic's queues as the name servers route them, each on its
own broker's gRPC endpoint.

Queue permissions and ids follow Apache RocketMQ's proxy (``RouteActivity``): per broker, the
read-only queues first, then the write-only, then the read-write ones. A broker's gRPC
endpoint is the ``grpcAddress`` of its GET_BROKER_RUNTIME_INFO, asked once per address and
kept for :data:`GRPC_ADDRESS_TTL_S` (a replicated broker's master registers its master
Service's address, which leads to another broker after a failover); a broker without one (it
serves no gRPC) is left out of the route. A topic's accepted
message types are its ``message.type`` attribute (RocketMQ 5's); a topic without one — made by
4.x tooling or auto-created — accepts every type, as it does over the remoting protocol.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconsume.broker.messaging.status import Refused
from reconsume.client.routes import MASTER_ID
from reconsume.errors import RemotingError
from reconsume.message.configs import TopicConfig, is_readable, is_writable
from reconsume.wire import fastjson
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.headers import GetRouteInfoRequestHeader
from reconsume.wire.v2 import definition_pb2 as pb

log = logging.getLogger(__name__)

TIMEOUT_S = 3.0
_TYPES: dict[str, tuple[pb.MessageType, ...]] = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
}
_MIXED: tuple[pb.MessageType, ...] = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


def accepted_types(config: TopicConfig | None) -> tuple[pb.MessageType, ...]:
    """The message types a topic accepts (its ``message.type`` attribute; all without one)."""
    if config is None:
        return _MIXED
    kind = config.attributes.get("message.type") or config.attributes.get("+message.type")
    return _TYPES.get((kind or "").upper(), _MIXED)


def endpoints(address: str) -> pb.Endpoints:
    """``host:port`` as Endpoints (IPv4, IPv6 or a domain name)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        scheme = pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def _permission(perm: int) -> pb.Permission:
    readable, writable = is_readable(perm), is_writable(perm)
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def queues_of(
    queue_data: Mapping[str, Any],
    topic: pb.Resource,
    broker: pb.Broker,
    types: Sequence[pb.MessageType],
) -> list[pb.MessageQueue]:
    """One broker's queues of a topic (RocketMQ's ``genMessageQueueFromQueueData``)."""
    perm = int(queue_data.get("perm", 6))
    reads, writes = int(queue_data["readQueueNums"]), int(queue_data["writeQueueNums"])
    counts: list[tuple[int, pb.Permission]] = []
    if is_readable(perm) and is_writable(perm):
        both = min(reads, writes)
        counts = [(reads - both, pb.READ), (writes - both, pb.WRITE), (both, pb.READ_WRITE)]
    elif is_writable(perm):
        counts = [(writes, pb.WRITE)]
    elif is_readable(perm):
        counts = [(reads, pb.READ)]
    else:
        counts = [(max(1, reads, writes), pb.NONE)]
    found: list[pb.MessageQueue] = []
    for count, permission in counts:
        found.extend(
            pb.MessageQueue(
                topic=topic,
                id=len(found),
                permission=permission,
                broker=broker,
                accept_message_types=types,
            )
            for _ in range(count)
        )
    return found


GRPC_ADDRESS_TTL_S = 10.0
"""How long a broker's gRPC endpoint is kept before it is asked again."""


class Routes:
    """Routes from the name servers, with the gRPC endpoints of their brokers."""

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addresses: Sequence[str],
        own: Callable[[], tuple[Sequence[str], str]],
        topic_config: Callable[[str], TopicConfig | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._namesrv = list(namesrv_addresses)
        self._own = own
        """(the remoting addresses this broker is registered by — its own, and as master its
        master Service's —, its gRPC address)."""
        self._topic_config = topic_config
        self._clock = clock
        self._grpc: dict[str, tuple[str | None, float]] = {}
        """Per remoting address: its gRPC address and until when it is kept."""

    async def _route(self, topic: str) -> dict[str, Any]:
        header = GetRouteInfoRequestHeader(topic, True).to_ext_fields()
        failure: Exception | None = None
        for address in self._namesrv:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header)
            try:
                response = await self._client.invoke(address, request, TIMEOUT_S)
            except RemotingError as exc:
                failure = exc
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise Refused(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            if response.code != ResponseCode.SUCCESS:
                failure = RemotingError(f"route of {topic} from {address}: {response.remark}")
                continue
            route: dict[str, Any] = fastjson.loads(response.body)
            return route
        raise Refused(pb.INTERNAL_SERVER_ERROR, f"no name server answered the route: {failure}")

    async def _grpc_address(self, remoting: str) -> str | None:
        own_remoting, own_grpc = self._own()
        if remoting in own_remoting:
            return own_grpc
        now = self._clock()
        kept = self._grpc.get(remoting)
        if kept is not None and now < kept[1]:
            return kept[0]
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            response = await self._client.invoke(remoting, request, TIMEOUT_S)
        except RemotingError as exc:
            log.warning("broker %s: no runtime info (%s); left out of routes", remoting, exc)
            return None  # not kept: asked again next time
        table = json.loads(response.body or b"{}").get("table") or {}
        found = table.get("grpcAddress")
        grpc = str(found) if found else None
        self._grpc[remoting] = (grpc, now + GRPC_ADDRESS_TTL_S)
        return grpc

    async def _brokers(self, route: Mapping[str, Any]) -> dict[str, dict[int, pb.Broker]]:
        brokers: dict[str, dict[int, pb.Broker]] = {}
        for data in route.get("brokerDatas") or []:
            name = str(data["brokerName"])
            for broker_id, remoting in (data.get("brokerAddrs") or {}).items():
                grpc = await self._grpc_address(str(remoting))
                if grpc is not None:
                    brokers.setdefault(name, {})[int(broker_id)] = pb.Broker(
                        name=name, id=int(broker_id), endpoints=endpoints(grpc)
                    )
        return brokers

    async def message_queues(self, topic: pb.Resource) -> list[pb.MessageQueue]:
        """QueryRoute's queues: every queue on every broker (masters and replicas)."""
        route = await self._route(topic.name)
        brokers = await self._brokers(route)
        types = accepted_types(self._topic_config(topic.name))
        found: list[pb.MessageQueue] = []
        for queue_data in route.get("queueDatas") or []:
            for broker in (brokers.get(str(queue_data["brokerName"])) or {}).values():
                found.extend(queues_of(queue_data, topic, broker, types))
        return found

    async def assignments(self, topic: pb.Resource, fifo: bool) -> list[pb.Assignment]:
        """QueryAssignment: a readable broker's master as one queue (id -1, any of its queues),
        or — for a FIFO group — each of its readable queues."""
        route = await self._route(topic.name)
        brokers = await self._brokers(route)
        found: list[pb.Assignment] = []
        for queue_data in route.get("queueDatas") or []:
            perm, reads = int(queue_data.get("perm", 6)), int(queue_data["readQueueNums"])
            master = (brokers.get(str(queue_data["brokerName"])) or {}).get(MASTER_ID)
            if master is None or not is_readable(perm) or reads <= 0:
                continue
            ids = range(reads) if fifo else (-1,)
            found.extend(
                pb.Assignment(
                    message_queue=pb.MessageQueue(
                        topic=topic, id=i, permission=_permission(perm), broker=master
                    )
                )
                for i in ids
            )
        return found
