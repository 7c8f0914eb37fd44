"""TLS on the transport over real loopback sockets, on asyncio's loop and on uvloop (the
servers' loop): permissive takes both kinds of client on one port, enforcing closes plaintext
ones (counted, logged once per peer) and goes on serving, a malformed handshake closes its
connection only, client certificates are required when asked for, and renewed certificate
files are in force for new connections without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from reconsume.errors import RemotingConnectError
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.tls import ClientAuth, TlsMode, TlsServerConfig, client_context
from reconsume.wire.transport import Connection
from tests.polling import eventually_async
from tests.tls_certs import CertAuthority, make_ca

ECHO = RequestCode.HEART_BEAT
LOOPS = pytest.mark.parametrize(
    "loop_factory",
    [asyncio.new_event_loop, uvloop.new_event_loop],
    ids=["asyncio", "uvloop"],
)
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def run(loop_factory: LoopFactory, coro: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(asyncio.wait_for(coro, 30))


def echo(request: RemotingCommand, connection: Connection) -> RemotingCommand:
    return request.respond(ResponseCode.SUCCESS, body=request.body[::-1])


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


def config_of(
    ca: CertAuthority, mode: TlsMode, auth: ClientAuth = ClientAuth.NONE
) -> TlsServerConfig:
    return TlsServerConfig(
        mode, str(ca.server.cert_file), str(ca.server.key_file), str(ca.ca_file), auth
    )


@contextlib.asynccontextmanager
async def serving(config: TlsServerConfig) -> AsyncIterator[tuple[RemotingServer, str]]:
    dispatcher = Dispatcher("tls-test")
    dispatcher.register(ECHO, echo)
    server = RemotingServer(dispatcher, tls=config)
    port = await server.start("127.0.0.1", 0)
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        await server.stop()


async def echo_via(address: str, tls: ssl.SSLContext | None) -> RemotingCommand:
    client = RemotingClient(tls=tls, signer=None)
    try:
        return await client.invoke(address, RemotingCommand.request(ECHO, body=b"abc"), 5.0)
    finally:
        await client.close()


async def served(address: str, tls: ssl.SSLContext | None) -> bool:
    response = await echo_via(address, tls)
    return response.code == ResponseCode.SUCCESS and response.body == b"cba"


async def refused(address: str, tls: ssl.SSLContext | None) -> bool:
    try:
        await echo_via(address, tls)
    except RemotingConnectError:
        return True
    return False


@LOOPS
def test_permissive_serves_tls_and_plaintext_clients_on_one_port(
    loop_factory: LoopFactory, ca: CertAuthority
) -> None:
    async def main() -> None:
        async with serving(config_of(ca, TlsMode.PERMISSIVE)) as (server, address):
            assert await served(address, client_context(str(ca.ca_file)))
            assert await served(address, None)
            assert server.tls is not None
            counters = server.tls.counters
            assert (counters.tls, counters.plaintext, counters.refused_plaintext) == (1, 1, 0)

    run(loop_factory, main())


@LOOPS
def test_enforcing_closes_plaintext_connections_and_goes_on_serving(
    loop_factory: LoopFactory, ca: CertAuthority, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with serving(config_of(ca, TlsMode.ENFORCING)) as (server, address):
            tls = client_context(str(ca.ca_file))
            assert await served(address, tls)
            for _ in range(3):
                assert await refused(address, None)
            assert await served(address, tls)
            assert server.tls is not None
            assert server.tls.counters.refused_plaintext == 3
            assert server.tls.counters.tls == 2
            assert len(server.connections) == 0

    with caplog.at_level(logging.WARNING, logger="reconsume.wire.tls_server"):
        run(loop_factory, main())
    logged = [r.getMessage() for r in caplog.records if "plaintext connection" in r.message]
    assert logged == [
        "tls-test: closed a plaintext connection from 127.0.0.1: TLS is enforced "
        "(logged once per peer address)"
    ]


@LOOPS
def test_a_malformed_handshake_closes_its_connection_only(
    loop_factory: LoopFactory, ca: CertAuthority
) -> None:
    async def main() -> None:
        async with serving(config_of(ca, TlsMode.PERMISSIVE)) as (server, address):
            tls = client_context(str(ca.ca_file))
            open_client = RemotingClient(tls=tls, signer=None)
            try:
                request = RemotingCommand.request(ECHO, body=b"xy")
                assert (await open_client.invoke(address, request, 5.0)).body == b"yx"
                host, _, port = address.rpartition(":")
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"\x16\x03\x01\x00\x05garbage-that-is-no-client-hello")
                # Closed by the server (after a TLS alert, perhaps): read to the end.
                with contextlib.suppress(ConnectionResetError):
                    await asyncio.wait_for(reader.read(), 10)
                assert reader.at_eof() or writer.transport.is_closing()
                writer.close()
                assert server.tls is not None
                assert server.tls.counters.failed_handshakes == 1
                # The connection opened before is still served, and new ones are.
                again = RemotingCommand.request(ECHO, body=b"zw")
                assert (await open_client.invoke(address, again, 5.0)).body == b"wz"
                assert await served(address, tls)
                assert await served(address, None)
            finally:
                await open_client.close()

    run(loop_factory, main())


@LOOPS
def test_a_server_certificate_from_an_unknown_ca_is_refused_by_the_client(
    loop_factory: LoopFactory, ca: CertAuthority, tmp_path: Path
) -> None:
    other = make_ca(tmp_path / "other")

    async def main() -> None:
        async with serving(config_of(ca, TlsMode.ENFORCING)) as (_server, address):
            assert await refused(address, client_context(str(other.ca_file)))
            assert await served(address, client_context(str(ca.ca_file)))

    run(loop_factory, main())


@LOOPS
def test_required_client_certificates(loop_factory: LoopFactory, ca: CertAuthority) -> None:
    async def main() -> None:
        config = config_of(ca, TlsMode.ENFORCING, ClientAuth.REQUIRED)
        async with serving(config) as (server, address):
            ca_file = str(ca.ca_file)
            assert await refused(address, client_context(ca_file))
            stranger = client_context(
                ca_file, str(ca.stranger.cert_file), str(ca.stranger.key_file)
            )
            assert await refused(address, stranger)
            member = client_context(ca_file, str(ca.client.cert_file), str(ca.client.key_file))
            assert await served(address, member)
            assert server.tls is not None
            assert server.tls.counters.tls == 1

    run(loop_factory, main())


@LOOPS
def test_optional_client_certificates_check_only_those_sent(
    loop_factory: LoopFactory, ca: CertAuthority
) -> None:
    async def main() -> None:
        config = config_of(ca, TlsMode.ENFORCING, ClientAuth.OPTIONAL)
        async with serving(config) as (_server, address):
            ca_file = str(ca.ca_file)
            assert await served(address, client_context(ca_file))
            stranger = client_context(
                ca_file, str(ca.stranger.cert_file), str(ca.stranger.key_file)
            )
            assert await refused(address, stranger)

    run(loop_factory, main())


@LOOPS
def test_renewed_certificate_files_are_used_for_new_connections(
    loop_factory: LoopFactory, tmp_path: Path
) -> None:
    first = make_ca(tmp_path / "first")
    renewed = make_ca(tmp_path / "renewed")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    cert, key = mounted / "tls.crt", mounted / "tls.key"
    shutil.copyfile(first.server.cert_file, cert)
    shutil.copyfile(first.server.key_file, key)
    config = TlsServerConfig(TlsMode.ENFORCING, str(cert), str(key))

    async def main() -> None:
        async with serving(config) as (server, address):
            assert server.tls is not None
            counters = server.tls.counters
            assert await served(address, client_context(str(first.ca_file)))
            # A half-written renewal (a certificate that is no PEM) keeps the old context.
            cert.write_text("not a certificate")

            async def reload_failed() -> bool:
                # A new connection makes the server look at its files.
                assert await served(address, client_context(str(first.ca_file)))
                return counters.reload_failures == 1

            await eventually_async(reload_failed, 10, "a failed reload")
            assert counters.last_reload_failed
            assert await served(address, client_context(str(first.ca_file)))
            shutil.copyfile(renewed.server.cert_file, cert)
            shutil.copyfile(renewed.server.key_file, key)
            renewed_tls = client_context(str(renewed.ca_file))

            async def renewed_in_force() -> bool:
                return not await refused(address, renewed_tls)

            await eventually_async(renewed_in_force, 10, "the renewed certificate")
            assert counters.reloads == 1
            assert not counters.last_reload_failed
            assert await refused(address, client_context(str(first.ca_file)))

    run(loop_factory, main())


@LOOPS
def test_a_silent_or_vanishing_peer_is_no_trouble(
    loop_factory: LoopFactory, ca: CertAuthority
) -> None:
    async def main() -> None:
        silent: socket.socket | None = None
        try:
            async with serving(config_of(ca, TlsMode.ENFORCING)) as (server, address):
                host, _, port = address.rpartition(":")
                silent = socket.create_connection((host, int(port)))
                gone = socket.create_connection((host, int(port)))
                gone.close()
                assert await served(address, client_context(str(ca.ca_file)))
                assert server.tls is not None
                assert server.tls.counters.refused_plaintext == 0
            # The server stopped with the silent peer still connected, waiting to sniff it.
        finally:
            if silent is not None:
                silent.close()

    run(loop_factory, main())


@LOOPS
def test_a_side_port_speaks_tls_as_the_main_one(
    loop_factory: LoopFactory, ca: CertAuthority
) -> None:
    """A master port (``listen_also``) of a server with TLS enforced: TLS clients are served,
    plaintext ones refused, and closing it refuses everyone there."""

    async def main() -> None:
        async with serving(config_of(ca, TlsMode.ENFORCING)) as (server, address):
            side = await server.listen_also("127.0.0.1", 0)
            await side.start_serving()
            other = f"127.0.0.1:{side.port}"
            tls = client_context(str(ca.ca_file))
            assert await served(other, tls)
            assert await refused(other, None)
            await side.close()
            assert await refused(other, tls)
            assert await served(address, tls)

    run(loop_factory, main())
