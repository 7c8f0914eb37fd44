"""Client ids: ``<ip>@<instance name>``, as RocketMQ clients name themselves to brokers."""

from __future__ import annotations

import functools
import socket


@functools.cache
def local_ip() -> str:
    """The address this host reaches the network from (no packet is sent), or loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"
    return address


def client_id(instance_name: str) -> str:
    return f"{local_ip()}@{instance_name}"
