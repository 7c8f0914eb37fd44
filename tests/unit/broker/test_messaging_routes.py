"""RocketMQ 5 routes' broker endpoints (:class:`Routes`): a broker's gRPC address is asked of it
(GET_BROKER_RUNTIME_INFO) and kept a while, then asked again, since a replicated broker's master
Service leads to another broker after a failover; an address this broker is registered by is
answered with its own gRPC address, unasked. One loopback server plays the name server and
the other broker."""

from __future__ import annotations

import asyncio
import json

from reconsume.broker.messaging.routes import GRPC_ADDRESS_TTL_S, Routes
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.transport import Connection
from reconsume.wire.v2 import definition_pb2 as pb

SERVICE = "10.96.0.9:10911"
"""What the route names the other broker's master by (its master Service)."""


class Cluster:
    """The name server's route and the other broker's runtime info, as they are now."""

    def __init__(self) -> None:
        self.master = "127.0.0.1:1"
        self.grpc = "10.244.0.7:8081"
        self.asked = 0

    def route(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        body = {
            "brokerDatas": [{"cluster": "c", "brokerName": "b", "brokerAddrs": {"0": self.master}}],
            "queueDatas": [{"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}],
        }
        return request.respond(body=json.dumps(body).encode())

    def runtime(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        self.asked += 1
        return request.respond(body=json.dumps({"table": {"grpcAddress": self.grpc}}).encode())


def endpoint_of(queues: list[pb.MessageQueue]) -> str:
    (queue,) = queues
    (address,) = queue.broker.endpoints.addresses
    return f"{address.host}:{address.port}"


def test_a_brokers_grpc_address_is_kept_a_while_and_this_brokers_own_is_not_asked() -> None:
    async def scenario() -> None:
        cluster = Cluster()
        dispatcher = Dispatcher("routes-test")
        dispatcher.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, cluster.route)
        dispatcher.register(RequestCode.GET_BROKER_RUNTIME_INFO, cluster.runtime)
        server = RemotingServer(dispatcher)
        port = await server.start("127.0.0.1", 0)
        here = f"127.0.0.1:{port}"
        cluster.master = here  # the other broker answers where the route says
        now = [100.0]
        own: tuple[tuple[str, ...], str] = (("10.244.0.9:10911",), "10.244.0.9:8081")
        client = RemotingClient(signer=None)
        routes = Routes(client, [here], lambda: own, lambda _topic: None, clock=lambda: now[0])
        topic = pb.Resource(name="orders")
        try:
            assert endpoint_of(await routes.message_queues(topic)) == "10.244.0.7:8081"
            cluster.grpc = "10.244.0.8:8081"  # a failover behind the same address
            now[0] += GRPC_ADDRESS_TTL_S - 1
            assert endpoint_of(await routes.message_queues(topic)) == "10.244.0.7:8081"
            assert cluster.asked == 1
            now[0] += 2
            assert endpoint_of(await routes.message_queues(topic)) == "10.244.0.8:8081"
            assert cluster.asked == 2
            # This broker, as master, is registered by its master Service: its own endpoint.
            own = (("10.244.0.9:10911", here), "10.244.0.9:8081")
            now[0] += GRPC_ADDRESS_TTL_S + 1
            assert endpoint_of(await routes.message_queues(topic)) == "10.244.0.9:8081"
            assert cluster.asked == 2
        finally:
            await client.close()
            await server.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))
