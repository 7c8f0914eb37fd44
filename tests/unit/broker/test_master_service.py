"""What a master does with its broker name's Service (:class:`MasterService`), with the slice
in memory (the real one is tests/k8s/test_master_endpoint.py's) and a real server on
loopback: it listens on the master ports (remoting, and gRPC when the broker serves it),
claims the slice for them, registers the Service's address as stable and gives its gRPC
address; a failed claim is tried again at the next step, a fenced one changes nothing;
stopping closes the master ports' connections."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from reconsume.broker.kube_api import KubeApiError
from reconsume.broker.master_endpoint import (
    Claimed,
    EndpointFenced,
    MasterService,
    SideServer,
)
from reconsume.broker.registration import Registrar
from reconsume.errors import RemotingConnectError
from reconsume.message.address import HostAddress
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.h2.server import GrpcServer
from reconsume.wire.transport import Connection
from tests.polling import eventually_async

SERVICE = "10.96.0.9:10911"
SERVICE_GRPC = "10.96.0.9:8081"
OWN = "127.0.0.1:10911"
PING = RequestCode.HEART_BEAT


class Slice:
    """A master Service's EndpointSlice in memory: the newest epoch's claim wins."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts = 0
        self.epoch = 0
        self.pod: HostAddress | None = None
        """The pod's address on the remoting master port."""
        self.ports: Mapping[str, int] = {}

    def __repr__(self) -> str:
        return "Service shop/orders-broker-0-master"

    def claim(self, ip: bytes, ports: Mapping[str, int], epoch: int, holder: str) -> Claimed:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise KubeApiError("GET https://api: no answer: timed out")
        if epoch < self.epoch:
            raise EndpointFenced(f"epoch {self.epoch} holds it")
        previous = None if self.pod is None else str(self.pod)
        self.epoch, self.pod, self.ports = epoch, HostAddress(ip, ports["broker"]), ports
        service = {"broker": SERVICE, "grpc": SERVICE_GRPC}
        return Claimed({name: service[name] for name in ports}, previous)


def registrar() -> Registrar:
    return Registrar(
        namesrv_addresses=(),
        broker_name="orders-broker-0",
        broker_addr=OWN,
        cluster_name="c",
        broker_id=0,
        interval_s=30.0,
        topic_wrapper=dict,
    )


def pong(request: RemotingCommand, connection: Connection) -> RemotingCommand:
    return request.respond(ResponseCode.SUCCESS)


async def serving(body: Any) -> None:
    dispatcher = Dispatcher("master-service-test")
    dispatcher.register(PING, pong)
    server = RemotingServer(dispatcher)
    await server.start("127.0.0.1", 0)
    try:
        await body(server)
    finally:
        await server.stop()


def remoting(server: RemotingServer) -> dict[str, tuple[SideServer, int]]:
    return {"broker": (server, 0)}


def run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(serving(body), 30))


def test_a_master_claims_the_service_for_its_master_port_and_gives_it_up() -> None:
    async def body(server: RemotingServer) -> None:
        found, registered = Slice(), registrar()
        master = MasterService(
            found, remoting(server), registered, listen_host="127.0.0.1", own_address=OWN,
            identity="orders-broker-0-0",
        )  # fmt: skip
        master.serve(4)
        await eventually_async(lambda: master.claimed == SERVICE, 10, "the claim")
        assert (registered.broker_addr, registered.stable) == (SERVICE, True)
        assert master.grpc_address is None  # no gRPC listener: the Service's is not claimed
        assert found.epoch == 4
        assert found.pod is not None
        master_port = f"127.0.0.1:{found.pod.port}"
        assert found.pod.port != 0
        client = RemotingClient(signer=None)
        try:
            taken = await client.connection(master_port)
            answer = await client.invoke(master_port, RemotingCommand.request(PING), 5)
            assert answer.code == ResponseCode.SUCCESS
            await master.stop()
            await asyncio.wait_for(taken.closed, 5)  # closed by the master giving it up
            with pytest.raises(RemotingConnectError):
                await client.invoke(master_port, RemotingCommand.request(PING), 5)
        finally:
            await client.close()

    run(body)


def test_a_failed_claim_is_tried_again_and_a_stale_one_changes_nothing() -> None:
    async def body(server: RemotingServer) -> None:
        found, registered = Slice(failures=1), registrar()
        master = MasterService(
            found, remoting(server), registered, listen_host="127.0.0.1", own_address=OWN,
            identity="orders-broker-0-0",
        )  # fmt: skip
        master.serve(2)  # the first attempt fails: the broker stays at its address
        await eventually_async(lambda: found.attempts == 1, 10, "the first attempt")
        assert master.claimed is None
        assert registered.broker_addr == OWN
        master.retry()  # the next step of the election
        await eventually_async(lambda: master.claimed == SERVICE, 10, "the claim")
        await master.stop()

        found.epoch = 7  # another broker took over meanwhile
        registered.broker_addr, registered.stable = OWN, False  # as the role registers it
        master.serve(5)
        await eventually_async(lambda: found.attempts == 3, 10, "the stale attempt")
        assert master.claimed is None
        assert (registered.broker_addr, registered.stable) == (OWN, False)
        await master.stop()

    run(body)


def test_a_master_serving_grpc_claims_its_grpc_master_port_too() -> None:
    """RocketMQ 5's clients: the slice's port ``grpc`` is the master's gRPC master port, the
    Service's gRPC address is the master's to give, and it is closed with the rest."""

    async def body(server: RemotingServer) -> None:
        grpc = GrpcServer({})
        found, registered = Slice(), registrar()
        listeners: dict[str, tuple[SideServer, int]] = {"broker": (server, 0), "grpc": (grpc, 0)}
        master = MasterService(
            found, listeners, registered, listen_host="127.0.0.1", own_address=OWN,
            identity="orders-broker-0-0",
        )  # fmt: skip
        master.serve(3)
        await eventually_async(lambda: master.claimed == SERVICE, 10, "the claim")
        assert master.grpc_address == SERVICE_GRPC
        assert set(found.ports) == {"broker", "grpc"}
        assert 0 not in found.ports.values()
        assert found.ports["grpc"] != found.ports["broker"]
        reader, writer = await asyncio.open_connection("127.0.0.1", found.ports["grpc"])
        try:
            # the preface and an empty SETTINGS frame
            writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = await asyncio.wait_for(reader.readexactly(9), 5)
            assert head[3] == 0x4  # the server's SETTINGS: an HTTP/2 server answers there
            await master.stop()
            assert master.grpc_address is None
            rest = await asyncio.wait_for(reader.read(), 5)  # to EOF: closed by the master
            assert b"this port closed" in rest  # its GOAWAY's debug data
        finally:
            writer.close()
        await grpc.stop(0)

    run(body)
