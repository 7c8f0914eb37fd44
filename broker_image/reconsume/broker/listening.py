"""Where one broker listens and which address it tells clients: the checks of
:class:`~reconsume.broker.settings.BrokerSettings`' listen, advertised, HTTP, gRPC and master
ports, and the addresses they come to. Every refusal starts ``setting <name>:``, as the other
settings' do."""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

from reconsume.errors import InvalidArgumentError
from reconsume.message.address import HostAddress
from reconsume.wire.listen import (
    EVERY_INTERFACE,
    is_every_address,
    listen_text,
    own_address,
    parse_listen,
)

if TYPE_CHECKING:
    from reconsume.broker.settings import BrokerSettings


def invalid(setting: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"setting {setting}: {problem}")


def check_listening(settings: BrokerSettings) -> str | None:
    """Refuse a listen address, advertised address, HTTP or gRPC port that cannot be; the
    advertised address to use when none is set and the broker listens on every interface
    (its host name's: :func:`reconsume.wire.listen.own_address`), else None."""
    host, port = settings.listen_host, settings.listen_port
    if host != EVERY_INTERFACE:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise invalid("listen_host", f"{host!r} is not an IP address") from None
    if not 0 <= port <= 65535:
        raise invalid("listen_port", f"{port} is not 0-65535")
    default = None
    if settings.advertised_address is not None:
        advertised = parse_address("advertised_address", settings.advertised_address)
        if ipaddress.ip_address(advertised.ip).is_unspecified:
            raise invalid("advertised_address", "must be an address clients can reach")
    elif is_every_address(host):
        own = own_address(host)
        if own is None:
            raise invalid(
                "advertised_address",
                f"required when listening on {listen_text(host, port)} (clients cannot reach"
                f" it, and this host's name {socket.gethostname()!r} has no other address to"
                " tell them)",
            )
        default = listen_text(own, 0)
    http = listen_address("http_listen", settings.http_listen)
    if http is not None:
        hosts = {http[0], host}
        if http[1] == port != 0 and (
            len(hosts) == 1 or any(is_every_address(each) for each in hosts)
        ):
            raise invalid("http_listen", f"port {http[1]} is the remoting port (listen)")
    grpc = listen_address("grpc_listen", settings.grpc_listen)
    if grpc is not None and grpc[1] != 0 and grpc[1] in (port, (http or ("", 0))[1]):
        raise invalid("grpc_listen", f"port {grpc[1]} is already the remoting or HTTP port")
    return default


def check_master_ports(settings: BrokerSettings) -> None:
    """The master ports are ports of their own, not the broker's others nor each other."""
    taken = {
        "the remoting port": settings.listen_port,
        "the HTTP port": (settings.http_address() or ("", 0))[1],
        "the gRPC port": (settings.grpc_address() or ("", 0))[1],
    }
    for setting in ("master_port", "master_grpc_port"):
        port = getattr(settings, setting)
        if not 0 <= port <= 65535:
            raise invalid(setting, f"{port} is not 0-65535")
        for what, other in taken.items():
            if port and port == other:
                raise invalid(setting, f"port {port} is {what}")
        taken[f"the {setting.replace('_', ' ')}"] = port


def listen_address(setting: str, text: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``:port`` setting (host ``""``: every
    interface); None for None."""
    if text is None:
        return None
    host, port = parse_listen(text, setting)
    if port > 65535:
        raise invalid(setting, f"port {port} is not 0-65535")
    return host, port


def parse_address(setting: str, text: str) -> HostAddress:
    try:
        return HostAddress.parse(text)
    except InvalidArgumentError as exc:
        raise invalid(setting, str(exc)) from None


def advertised(settings: BrokerSettings, bound_port: int) -> HostAddress:
    """The address to advertise once the server listens on ``bound_port``."""
    if settings.advertised_address is None:
        return HostAddress(ipaddress.ip_address(settings.listen_host).packed, bound_port)
    address = parse_address("advertised_address", settings.advertised_address)
    return address if address.port else HostAddress(address.ip, bound_port)
