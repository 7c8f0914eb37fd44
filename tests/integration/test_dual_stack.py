"""Servers listening on every interface (``--listen :PORT``), as the operator starts them in
pods: one port that IPv4 and IPv6 clients both reach, a broker advertising an IPv6 address,
born hosts as the client's own family, and the HTTP endpoint on both families."""

from __future__ import annotations

import asyncio
import ipaddress
import urllib.request
from pathlib import Path
from typing import Any

from reconsume.message.address import HostAddress
from reconsume.message.ids import parse_offset_msg_id
from reconsume.wire.codes import ResponseCode

from .cluster import start_broker
from .processes import start_server
from .retry_support import read_queue
from .wire_client import BrokerClient, eventually, ok

TOPIC = "dual-stack"


def test_servers_on_every_interface_serve_both_families_on_one_port(tmp_path: Path) -> None:
    namesrv = start_server("namesrv", "--listen", ":0")
    assert namesrv.address.startswith(":"), namesrv.address  # "listening on :PORT"
    namesrv_port = namesrv.address[1:]
    broker = start_broker(
        f"127.0.0.1:{namesrv_port}",
        "broker-v6",
        tmp_path / "store",
        listen=":0",
        extra=("--advertise", "[::1]:0", "--http-listen", ":0"),
    )
    try:
        advertised = HostAddress.parse(broker.address)
        assert ipaddress.ip_address(advertised.ip) == ipaddress.ip_address("::1")
        port = advertised.port
        at = {"IPv4": f"127.0.0.1:{port}", "IPv6": f"[::1]:{port}"}

        async def scenario() -> None:
            async with BrokerClient() as client:
                ok(await client.create_topic(at["IPv4"], TOPIC, 1))
                receipts = {}
                for family, address in at.items():
                    sent = ok(await client.send(address, TOPIC, family.encode()))
                    receipts[family] = sent.ext_fields["msgId"]
                stored = {m.body.decode(): m for m in await read_queue(client, at["IPv6"], TOPIC)}
                assert sorted(stored) == ["IPv4", "IPv6"]
                for family, message in stored.items():
                    born = ipaddress.ip_address(message.born_host.ip)
                    assert born == ipaddress.ip_address("127.0.0.1" if family == "IPv4" else "::1")
                    assert message.store_host == advertised
                    # The offset message id carries the IPv6 store host (56 hex digits).
                    assert len(receipts[family]) == 56
                    assert parse_offset_msg_id(receipts[family])[0] == advertised

                # Both name-server families route the topic to the advertised IPv6 address.
                for namesrv_at in (f"127.0.0.1:{namesrv_port}", f"[::1]:{namesrv_port}"):

                    async def routed(where: str = namesrv_at) -> dict[str, Any] | None:
                        return await client.route(where, TOPIC)

                    route = await eventually(routed, what=f"a route from {namesrv_at}")
                    (data,) = route["brokerDatas"]
                    assert data["brokerAddrs"] == {"0": broker.address}

                missing = await client.pull(at["IPv6"], "g", "no-such-topic", 0, 0)
                assert missing.code == ResponseCode.TOPIC_NOT_EXIST

        asyncio.run(scenario())

        http = _http_port(broker.output)
        for host in ("127.0.0.1", "[::1]"):
            url = f"http://{host}:{http}/healthz"
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.read() == b"ok\n"
    finally:
        assert broker.stop() == 0, "".join(broker.output)
        assert namesrv.stop() == 0, "".join(namesrv.output)


def _http_port(output: list[str]) -> int:
    (line,) = [line for line in output if "serving HTTP on" in line]
    return int(line.rstrip().rpartition(":")[2])
