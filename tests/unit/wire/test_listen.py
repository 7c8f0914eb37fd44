"""Where servers listen (``reconsume.wire.listen``), on real loopback sockets: ``:PORT`` is one
dual-stack socket that IPv4 and IPv6 peers reach on the same port, the IPv4 ones seen as IPv4;
``0.0.0.0`` and ``::`` keep to their own family; the flag's text is checked."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from reconsume.errors import InvalidArgumentError
from reconsume.wire.listen import (
    create_server,
    is_every_address,
    listen_text,
    listening_socket,
    own_address,
    parse_listen,
    peer_host_port,
)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (":10911", ("", 10911)),
        (":0", ("", 0)),
        ("0.0.0.0:9876", ("0.0.0.0", 9876)),
        ("[::]:9876", ("::", 9876)),
        ("::1:9876", ("::1", 9876)),
        ("[fd00::5]:8080", ("fd00::5", 8080)),
    ],
)
def test_the_flag_takes_an_address_or_a_port_alone(text: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(text) == parsed
    host, port = parsed
    assert parse_listen(listen_text(host, port)) == parsed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("10911", "is not host:port"),
        (":", "is not host:port"),
        (":-1", "is not host:port"),
        ("localhost:10911", "has no valid IP address"),
    ],
)
def test_a_bad_flag_names_the_setting(text: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^setting http_listen: .*{problem}"):
        parse_listen(text, "http_listen")


def test_every_address_is_one_clients_cannot_be_told() -> None:
    assert [is_every_address(h) for h in ("", "0.0.0.0", "::", "127.0.0.1", "::1")] == [
        True, True, True, False, False,
    ]  # fmt: skip


@pytest.fixture
def listening() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def accepted_peer(server: socket.socket, host: str) -> tuple[str, int] | None:
    """Connect to ``server``'s port at ``host`` and return the accepted side's peer."""
    port = server.getsockname()[1]
    with socket.create_connection((host, port), timeout=5) as client:
        server.setblocking(True)
        accepted, peername = server.accept()
        accepted.close()
        assert peer_host_port(peername) == (host, client.getsockname()[1])
        return peer_host_port(peername)


def test_every_interface_is_one_port_for_both_families(listening: list[socket.socket]) -> None:
    server = listening_socket("", 0)
    listening.append(server)
    assert server.family == socket.AF_INET6
    assert server.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
    assert accepted_peer(server, "127.0.0.1") is not None  # not ::ffff:127.0.0.1
    assert accepted_peer(server, "::1") is not None


@pytest.mark.parametrize(("host", "other"), [("0.0.0.0", "::1"), ("::", "127.0.0.1")])
def test_a_wildcard_of_one_family_keeps_to_it(
    listening: list[socket.socket], host: str, other: str
) -> None:
    server = listening_socket(host, 0)
    listening.append(server)
    own = "127.0.0.1" if other == "::1" else "::1"
    assert accepted_peer(server, own) is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((other, server.getsockname()[1]), timeout=5).close()


def test_a_port_taken_on_one_family_is_taken_for_every_interface(
    listening: list[socket.socket],
) -> None:
    taken = listening_socket("127.0.0.1", 0)
    listening.append(taken)
    with pytest.raises(OSError, match="Address already in use"):
        listening_socket("", taken.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "resolved", "own"),
    [
        ("", ["127.0.0.1", "fe80::1%eth0", "10.244.0.6", "fd00::6"], "10.244.0.6"),
        ("", ["fd00::6", "10.244.0.6"], "fd00::6"),
        ("0.0.0.0", ["fd00::6", "10.244.0.6"], "10.244.0.6"),
        ("::", ["10.244.0.6", "::1", "fd00::6"], "fd00::6"),
        ("::", ["10.244.0.6"], None),
        ("", ["127.0.0.1", "127.0.1.1", "::1"], None),
    ],
)
def test_the_address_told_for_every_interface_is_the_host_names_own(
    monkeypatch: pytest.MonkeyPatch, host: str, resolved: list[str], own: str | None
) -> None:
    def getaddrinfo(name: str, *_args: object, **_kwargs: object) -> list[tuple[Any, ...]]:
        assert name == "pod-0"
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0))
            for ip in resolved
        ]

    monkeypatch.setattr(socket, "gethostname", lambda: "pod-0")
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert own_address(host) == own


def test_a_host_name_that_does_not_resolve_has_no_own_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(*_args: object, **_kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    assert own_address("") is None


def test_an_ipv4_peer_of_a_dual_stack_socket_is_given_as_ipv4() -> None:
    assert peer_host_port(("::ffff:10.0.0.7", 5, 0, 0)) == ("10.0.0.7", 5)
    assert peer_host_port(("fd00::7", 5, 0, 0)) == ("fd00::7", 5)
    assert peer_host_port(("10.0.0.7", 5)) == ("10.0.0.7", 5)
    assert peer_host_port("/run/socket") is None


def test_a_server_on_every_interface_answers_both_families() -> None:
    class Echo(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            assert isinstance(self.transport, asyncio.WriteTransport)
            self.transport.write(data)

    async def main() -> list[bytes]:
        server = await create_server(Echo, "", 0)
        port = server.sockets[0].getsockname()[1]
        answers = []
        for host in ("127.0.0.1", "::1"):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(host.encode())
            answers.append(await reader.readexactly(len(host)))
            writer.close()
        server.close()
        await server.wait_closed()
        return answers

    assert asyncio.run(main()) == [b"127.0.0.1", b"::1"]
