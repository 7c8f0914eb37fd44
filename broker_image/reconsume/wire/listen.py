"""The ``--listen host:port`` flag both servers take, declared once."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from reconsume.errors import InvalidArgumentError
from reconsume.flags import Flag, flag
from reconsume.message.address import HostAddress


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` as ``(listen_host, listen_port)``; refused naming the setting."""
    try:
        address = HostAddress.parse(text)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"setting listen: {exc}") from None
    return str(ipaddress.ip_address(address.ip)), address.port


def _host_port(host: object, port: object) -> str:
    return f"{host}:{port}"


def listen_flag() -> Mapping[str, Flag]:
    """Metadata of a ``listen_host`` field: ``--listen`` sets it and ``listen_port``."""
    return flag(
        "--listen",
        "host:port to listen on; port 0: any free one",
        parse=parse_listen,
        sets=("listen_host", "listen_port"),
        show=_host_port,
    )
