"""Where servers listen: the ``--listen host:port`` flag every server takes, the listening
socket it names, and the peer addresses of the connections it accepts.

An empty host (``:9876``, as Go and Kafka write it) is every interface of both IP families on
one port: one IPv6 socket with ``IPV6_V6ONLY`` off, which IPv4 peers reach as IPv4-mapped
addresses (``::ffff:10.0.0.1``; :func:`peer_host_port` gives them back as IPv4), or an IPv4
socket alone where the kernel has no IPv6. That is what a pod wants whichever family its
cluster gives it first. ``0.0.0.0`` is every IPv4 interface only and ``::`` every IPv6
interface only, as asyncio binds them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Mapping

from reconsume.errors import InvalidArgumentError
from reconsume.flags import Flag, flag
from reconsume.message.address import HostAddress

EVERY_INTERFACE = ""
"""The listen host of every interface, IPv4 and IPv6."""
BACKLOG = 100
_MAPPED_PREFIX = "::ffff:"


def parse_listen(text: str, setting: str = "listen") -> tuple[str, int]:
    """``host:port`` (an IP address, IPv6 bracketed or not) or ``:port`` as ``(host, port)``,
    the host ``""`` for every interface; refused naming the setting. The port's range is the
    setting's own check."""
    if text.startswith(":") and text[1:].isascii() and text[1:].isdigit():
        host, port = EVERY_INTERFACE, int(text[1:])
    else:
        try:
            address = HostAddress.parse(text)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"setting {setting}: {exc}") from None
        host, port = str(ipaddress.ip_address(address.ip)), address.port
    return host, port


def is_every_address(host: str) -> bool:
    """Whether listening on ``host`` leaves clients without an address to reach (``""``,
    ``0.0.0.0``, ``::``)."""
    return host == EVERY_INTERFACE or ipaddress.ip_address(host).is_unspecified


def own_address(host: str) -> str | None:
    """The address to tell clients of a server listening on every interface (``host`` ``""``,
    ``0.0.0.0`` or ``::``) when nobody said which: the first address this machine's host name
    resolves to, of a family the listener takes, that is neither loopback nor link-local — a
    container's or a pod's own address, from the ``/etc/hosts`` its runtime writes (Apache
    RocketMQ's broker likewise picks a local address for ``brokerIP1``). None when there is
    none."""
    families = {
        EVERY_INTERFACE: (socket.AF_INET, socket.AF_INET6),
        "0.0.0.0": (socket.AF_INET,),
        "::": (socket.AF_INET6,),
    }.get(str(ipaddress.ip_address(host)) if host else host, ())
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    for family, _kind, _proto, _name, address in infos:
        if family not in families:
            continue
        ip = ipaddress.ip_address(str(address[0]).partition("%")[0])
        if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
            return str(ip)
    return None


def listen_text(host: str, port: int) -> str:
    """``host:port`` as the flag takes it: ``1.2.3.4:5``, ``[::1]:5``, ``:5``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening, non-blocking socket on ``host:port`` (port 0 picks one), with
    ``SO_REUSEADDR``; the host ``""`` as the module says."""
    if host == EVERY_INTERFACE:
        try:
            dual = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        except OSError:  # a kernel without IPv6
            return _bound(socket.socket(socket.AF_INET, socket.SOCK_STREAM), ("0.0.0.0", port))
        dual.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        return _bound(dual, ("::", port))
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        address: tuple[str, int] = (host, port)
    except ValueError:  # a name: its first address
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, address = info[0][0], (str(info[0][4][0]), int(info[0][4][1]))
    sock = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    return _bound(sock, address)


def _bound(sock: socket.socket, address: tuple[str, int]) -> socket.socket:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def create_server(
    factory: Callable[[], asyncio.BaseProtocol], host: str, port: int, *, start_serving: bool = True
) -> asyncio.Server:
    """``loop.create_server`` on :func:`listening_socket`'s socket."""
    sock = listening_socket(host, port)
    try:
        return await asyncio.get_running_loop().create_server(
            factory, sock=sock, backlog=BACKLOG, start_serving=start_serving
        )
    except BaseException:
        sock.close()
        raise


def bound_port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


def peer_host_port(peername: object) -> tuple[str, int] | None:
    """A TCP peer's ``(host, port)`` from ``getpeername()``, an IPv4-mapped IPv6 host (a
    dual-stack socket's IPv4 peer) as the IPv4 address it is; None for anything else."""
    if not (isinstance(peername, tuple) and len(peername) >= 2):
        return None
    host = str(peername[0])
    if host.startswith(_MAPPED_PREFIX) and "." in host:
        host = host[len(_MAPPED_PREFIX) :]
    return host, int(peername[1])


def _host_port(host: object, port: object) -> str:
    return listen_text(str(host), int(str(port)))


def listen_flag() -> Mapping[str, Flag]:
    """Metadata of a ``listen_host`` field: ``--listen`` sets it and ``listen_port``."""
    return flag(
        "--listen",
        "host:port to listen on (:port: every interface, IPv4 and IPv6); port 0: any free one",
        parse=parse_listen,
        sets=("listen_host", "listen_port"),
        show=_host_port,
    )
