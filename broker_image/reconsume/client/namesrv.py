"""Asking name servers for topic routes, with a cache the producer and consumers share."""

from __future__ import annotations

import time
from collections.abc import Sequence

from reconsume.client.routes import TopicRoute
from reconsume.errors import (
    InvalidArgumentError,
    RemotingConnectError,
    RemotingError,
    ResponseError,
)
from reconsume.message.names import DEFAULT_TOPIC
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.errors import raise_for_response
from reconsume.wire.headers import GetRouteInfoRequestHeader


class TopicNotFoundError(ResponseError):
    """No name server knows the topic (and none serves the auto-create template)."""


class RouteCache:
    """Routes by topic, refreshed after ``ttl_s``; name servers are tried in turn."""

    def __init__(
        self,
        client: RemotingClient,
        name_servers: Sequence[str],
        *,
        ttl_s: float = 30.0,
        timeout_s: float = 3.0,
    ) -> None:
        if not name_servers:
            raise InvalidArgumentError("at least one name server address is needed")
        self._client = client
        self._name_servers = list(name_servers)
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._next = 0

    async def fetch(self, topic: str) -> TopicRoute | None:
        """The route from a name server, or None when the topic is unknown there."""
        last_error: RemotingError | None = None
        for _ in range(len(self._name_servers)):
            address = self._name_servers[self._next % len(self._name_servers)]
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                GetRouteInfoRequestHeader(topic, True).to_ext_fields(),
            )
            try:
                response = await self._client.invoke(address, request, self._timeout_s)
            except RemotingError as exc:
                last_error = exc
                self._next += 1
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            raise_for_response(response, f"route of {topic} from {address}")
            route = TopicRoute.parse(topic, response.body)
            self._routes[topic] = (time.monotonic(), route)
            return route
        assert last_error is not None
        raise last_error

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute | None:
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self._ttl_s:
            return cached[1]
        return await self.fetch(topic)

    async def for_sending(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The route to send to: the topic's own, or — for a topic no broker has yet — the
        brokers serving the auto-create template (RocketMQ's TBW102), which create it on the
        first send."""
        route = await self.get(topic, refresh=refresh)
        if route is not None and not route.write_queues and not refresh:
            # known but not writable now (a broker name between masters): ask again
            route = await self.get(topic, refresh=True)
        if route is not None and route.write_queues:
            return route
        if route is not None and route.read_queues:
            # its brokers are there but none has a master: one is being elected
            raise RemotingConnectError(f"topic {topic!r}: no broker of its route has a master now")
        template = await self.get(DEFAULT_TOPIC, refresh=refresh)
        if template is None or not template.write_queues:
            raise TopicNotFoundError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"no name server knows topic {topic!r} and no broker auto-creates topics",
                "route",
            )
        return template.for_topic(topic)
