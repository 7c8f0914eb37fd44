"""TLS on real servers: a name server and a broker with ``--tls-mode enforcing`` refuse
plaintext clients (the connection closed, logged once per peer) and go on serving TLS ones,
the broker registering over TLS because its environment says so; the Python producer and push
consumer round trip over TLS, with a context or from the environment; ``permissive`` takes both
on one port; required client certificates refuse a client without one; a malformed handshake
closes its connection only; a certificate that does not load stops the server at start."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.errors import RemotingConnectError
from reconsume.message.model import Message
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.tls import (
    TLS_CA_FILE_ENV,
    TLS_CERT_FILE_ENV,
    TLS_ENV,
    TLS_KEY_FILE_ENV,
    client_context,
)

from ..polling import eventually, eventually_async
from ..scratch import module_dir
from ..tls_certs import CertAuthority, make_ca
from .cluster import Collector, send_all, start_broker
from .processes import ServerProcess, start_server

TIMEOUT_S = 5.0
REFUSED_LINE = "closed a plaintext connection from 127.0.0.1: TLS is enforced"


@dataclass
class Servers:
    ca: CertAuthority
    namesrv: ServerProcess
    broker: ServerProcess

    @property
    def tls(self) -> ssl.SSLContext:
        return client_context(str(self.ca.ca_file))


def tls_flags(ca: CertAuthority, mode: str, *extra: str) -> tuple[str, ...]:
    return (
        "--tls-mode", mode, "--tls-cert-file", str(ca.server.cert_file),
        "--tls-key-file", str(ca.server.key_file), *extra,
    )  # fmt: skip


def tls_env(ca: CertAuthority) -> dict[str, str]:
    return {TLS_ENV: "true", TLS_CA_FILE_ENV: str(ca.ca_file)}


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with module_dir(tmp_path_factory, "tls") as root:
        ca = make_ca(root / "ca")
        namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *tls_flags(ca, "enforcing"))
        try:
            broker = start_server(
                "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv.address,
                "--store-dir", str(root / "store"), "--broker-name", "broker-tls",
                "--cluster", "tls", *tls_flags(ca, "enforcing"), env=tls_env(ca),
            )  # fmt: skip
        except BaseException:
            namesrv.kill()
            raise
        try:
            yield Servers(ca, namesrv, broker)
        finally:
            broker_code = broker.stop()
            namesrv_code = namesrv.stop()
            assert broker_code == 0, "".join(broker.output)
            assert namesrv_code == 0, "".join(namesrv.output)


async def _invoke(address: str, code: int, tls: ssl.SSLContext | None) -> RemotingCommand:
    client = RemotingClient(tls=tls, signer=None)
    try:
        return await client.invoke(address, RemotingCommand.request(code), TIMEOUT_S)
    finally:
        await client.close()


def _answered(address: str, code: int, tls: ssl.SSLContext | None) -> bool:
    """True when the server answered (whatever the answer), False when it closed the
    connection instead."""
    try:
        asyncio.run(_invoke(address, code, tls))
    except RemotingConnectError:
        return False
    return True


async def create_topic(admin: AdminClient, topic: str, queues: int) -> None:
    """``topic`` on the one broker, once the name server routes it (the broker registered)."""
    await admin.create_topic(topic, queues=queues)

    async def routed() -> bool:
        route = await admin.route(topic)
        return route is not None and len(route.read_queues) == queues

    await eventually_async(routed, what=f"route of {topic}")


def _refusals_logged(server: ServerProcess) -> int:
    return sum(REFUSED_LINE in line for line in server.output)


def test_enforcing_servers_refuse_plaintext_clients_and_serve_tls_ones(
    enforcing: Servers,
) -> None:
    broker, namesrv = enforcing.broker.address, enforcing.namesrv.address
    runtime_info = RequestCode.GET_BROKER_RUNTIME_INFO
    cluster_info = RequestCode.GET_BROKER_CLUSTER_INFO
    for _ in range(3):
        assert not _answered(broker, runtime_info, None)
        assert not _answered(namesrv, cluster_info, None)
    assert asyncio.run(_invoke(broker, runtime_info, enforcing.tls)).code == ResponseCode.SUCCESS
    assert asyncio.run(_invoke(namesrv, cluster_info, enforcing.tls)).code == ResponseCode.SUCCESS
    # Each server logged its refusals once for the peer, however many there were.
    for server in (enforcing.broker, enforcing.namesrv):
        eventually(lambda s=server: _refusals_logged(s) >= 1, 10, "the refusal logged")
        assert _refusals_logged(server) == 1, "".join(server.output)


def test_the_broker_registers_over_tls_and_clients_round_trip(enforcing: Servers) -> None:
    topic, group, count = "tls-orders", "tls-consumer", 200

    async def scenario() -> tuple[Collector, list[str]]:
        async with AdminClient([enforcing.namesrv.address], tls=enforcing.tls) as admin:
            # The route comes from the broker's registration: it reached the name server.
            await create_topic(admin, topic, 2)
        received = Collector()
        settings = ConsumerSettings(instance_name="tls-consumer")
        consumer = PushConsumer(
            [enforcing.namesrv.address], group, settings=settings, tls=enforcing.tls
        )
        consumer.subscribe(topic)
        consumer.register_listener(received)
        async with consumer:
            async with Producer([enforcing.namesrv.address], tls=enforcing.tls) as producer:
                sent = await send_all(
                    producer, (Message(topic, f"secret {i}".encode()) for i in range(count))
                )
            await eventually_async(
                lambda: len(set(received.received)) >= count, 30, f"{count} deliveries"
            )
        return received, [s.msg_id for s in sent]

    received, sent = asyncio.run(scenario())
    assert set(received.received) == set(sent)
    assert {m.body for m in received.messages} == {f"secret {i}".encode() for i in range(count)}


def test_a_producer_takes_tls_from_the_environment(
    enforcing: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv = [enforcing.namesrv.address]

    async def send(tls: bool | None) -> str:
        async with Producer(namesrv, tls=tls, send_timeout_s=TIMEOUT_S, retries=0) as producer:
            return (await producer.send(Message("tls-env", b"from the environment"))).msg_id

    monkeypatch.setenv(TLS_ENV, "true")
    monkeypatch.setenv(TLS_CA_FILE_ENV, str(enforcing.ca.ca_file))
    assert asyncio.run(send(None))
    # tls=False is plaintext whatever the environment says: refused.
    with pytest.raises(RemotingConnectError):
        asyncio.run(send(False))
    monkeypatch.delenv(TLS_ENV)
    with pytest.raises(RemotingConnectError):
        asyncio.run(send(None))
    assert asyncio.run(send(True))  # TLS with the environment's CA file


def test_a_malformed_handshake_closes_its_connection_only(enforcing: Servers) -> None:
    host, _, port = enforcing.broker.address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05" + b"\x00" * 64)
        try:
            while sock.recv(4096):  # an alert, perhaps, then the end
                pass
        except ConnectionResetError:
            pass
    assert _answered(enforcing.broker.address, RequestCode.GET_BROKER_RUNTIME_INFO, enforcing.tls)
    assert "TLS handshake with 127.0.0.1 failed" in "".join(enforcing.broker.output)


def test_permissive_servers_take_both_kinds_of_client(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *tls_flags(ca, "permissive"))
    broker = None
    try:
        # The broker registers in plaintext, on the same port TLS clients use.
        broker = start_broker(
            namesrv.address, "broker-p", tmp_path / "store", cluster="permissive",
            extra=tls_flags(ca, "permissive"),
        )  # fmt: skip

        async def scenario() -> list[str]:
            tls = client_context(str(ca.ca_file))
            async with AdminClient([namesrv.address], tls=tls) as admin:
                await create_topic(admin, "both", 1)
            ids = []
            for context in (tls, None):
                async with Producer([namesrv.address], tls=context or False) as producer:
                    ids.append((await producer.send(Message("both", b"x"))).msg_id)
            return ids

        assert len(set(asyncio.run(scenario()))) == 2
        info = RequestCode.GET_BROKER_RUNTIME_INFO
        assert _answered(broker.address, info, None)
        assert _answered(broker.address, info, client_context(str(ca.ca_file)))
    finally:
        if broker is not None:
            assert broker.stop() == 0, "".join(broker.output)
        assert namesrv.stop() == 0, "".join(namesrv.output)


def test_required_client_certificates_refuse_a_client_without_one(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    auth = ("--tls-client-auth", "required", "--tls-ca-file", str(ca.ca_file))
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *tls_flags(ca, "enforcing", *auth))
    try:
        info = RequestCode.GET_BROKER_CLUSTER_INFO
        ca_file = str(ca.ca_file)
        assert not _answered(namesrv.address, info, client_context(ca_file))
        stranger = client_context(ca_file, str(ca.stranger.cert_file), str(ca.stranger.key_file))
        assert not _answered(namesrv.address, info, stranger)
        member = client_context(ca_file, str(ca.client.cert_file), str(ca.client.key_file))
        assert _answered(namesrv.address, info, member)
    finally:
        assert namesrv.stop() == 0, "".join(namesrv.output)


def test_client_certificates_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = make_ca(tmp_path / "ca")
    auth = ("--tls-client-auth", "required", "--tls-ca-file", str(ca.ca_file))
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *tls_flags(ca, "enforcing", *auth))
    try:
        monkeypatch.setenv(TLS_ENV, "true")
        monkeypatch.setenv(TLS_CA_FILE_ENV, str(ca.ca_file))
        monkeypatch.setenv(TLS_CERT_FILE_ENV, str(ca.client.cert_file))
        monkeypatch.setenv(TLS_KEY_FILE_ENV, str(ca.client.key_file))

        async def cluster_info() -> RemotingCommand:
            client = RemotingClient(signer=None)  # TLS and certificate: the environment's
            try:
                request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
                return await client.invoke(namesrv.address, request, TIMEOUT_S)
            finally:
                await client.close()

        assert asyncio.run(cluster_info()).code == ResponseCode.SUCCESS
    finally:
        assert namesrv.stop() == 0, "".join(namesrv.output)


def test_a_certificate_that_does_not_load_stops_the_server_at_start(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    wrong_key = (
        "--tls-mode", "enforcing", "--tls-cert-file", str(ca.server.cert_file),
        "--tls-key-file", str(ca.client.key_file),
    )  # fmt: skip
    for command in (
        ("namesrv", "--listen", "127.0.0.1:0", *wrong_key),
        ("broker", "--listen", "127.0.0.1:0", "--store-dir", str(tmp_path / "s"), *wrong_key),
    ):
        with pytest.raises(RuntimeError, match=r"KEY_VALUES_MISMATCH|key values mismatch"):
            start_server(*command)
