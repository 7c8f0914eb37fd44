"""The broker's HTTP port on a real process: /metrics moving with sends and pulls, /healthz,
/readyz following recovery and registration, 404/405, and garbage closing only its own
connection."""

from __future__ import annotations

import asyncio
import http.client
import platform
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconsume.wire.codes import ResponseCode

from ..scratch import module_dir
from .processes import MALFORMED_FRAMES, RECONSUME, ServerProcess, start_server
from .wire_client import BrokerClient, eventually, ok, records

_HTTP_LINE = re.compile(r"serving HTTP on (\S+)")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def http_address(server: ServerProcess) -> str:
    for line in server.output:
        match = _HTTP_LINE.search(line)
        if match:
            return match.group(1)
    raise AssertionError(f"no HTTP address announced: {''.join(server.output)}")


def start_broker(store: Path, *extra: str) -> tuple[ServerProcess, str]:
    server = start_server(
        "broker", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
        "--store-dir", str(store), *extra,
    )  # fmt: skip
    return server, http_address(server)


def get(address: str, path: str, method: str = "GET", **headers: str) -> tuple[int, str, Any]:
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(), response.headers
    finally:
        connection.close()


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(address: str) -> Samples:
    """Every sample of /metrics, by (sample name, labels)."""
    status, body, headers = get(address, "/metrics")
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def raw_http(address: str, payload: bytes) -> bytes:
    """Send ``payload``, half-close, return the answer; a reset (the server closing with
    unread bytes) counts as closed without an answer."""
    host, _, port = address.rpartition(":")
    chunks = []
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    with module_dir(tmp_path_factory, "http") as root:
        server, address = start_broker(root / "store")
        yield server, address
        assert server.stop() == 0, "".join(server.output)


def test_metrics_count_sends_pulls_and_queue_offsets(broker: tuple[ServerProcess, str]) -> None:
    server, address = broker
    before = scrape(address)
    assert value(before, "reconsume_messages_in_total", topic="metered") == 0

    async def traffic() -> None:
        async with BrokerClient() as client:
            ok(await client.create_topic(server.address, "metered", 2))
            for _ in range(3):
                ok(await client.send(server.address, "metered", b"x" * 10, queue_id=0))
            batch = [(b"y" * 7, {}), (b"z" * 7, {})]
            ok(await client.send_batch(server.address, "metered", batch, queue_id=1))
            pulled = ok(await client.pull(server.address, "g-metrics", "metered", 0, 0))
            assert len(records(pulled)) == 3
            empty = await client.pull(server.address, "g-metrics", "metered", 0, 3)
            assert empty.code == ResponseCode.PULL_NOT_FOUND
            during = scrape(address)
            assert value(during, "reconsume_connections") >= 1

    run(traffic())
    after = scrape(address)
    assert value(after, "reconsume_messages_in_total", topic="metered") == 5
    assert value(after, "reconsume_messages_in_bytes_total", topic="metered") == 3 * 10 + 2 * 7
    assert value(after, "reconsume_messages_out_total", topic="metered", group="g-metrics") == 3
    for result in ("found", "not_found"):
        grown = value(after, "reconsume_pull_requests_total", result=result) - value(
            before, "reconsume_pull_requests_total", result=result
        )
        assert grown == 1, result
    assert value(after, "reconsume_queue_max_offset", topic="metered", queue_id="0") == 3
    assert value(after, "reconsume_queue_max_offset", topic="metered", queue_id="1") == 2
    assert value(after, "reconsume_store_bytes") > value(before, "reconsume_store_bytes")
    assert value(after, "reconsume_store_max_offset") > value(before, "reconsume_store_max_offset")
    assert value(after, "reconsume_store_writable") == 1
    assert value(after, "reconsume_topics") >= 1
    assert value(after, "reconsume_queue_series_omitted") == 0
    assert value(after, "reconsume_ready") == 1
    assert value(after, "reconsume_build_info", version=_version(), python=_python()) == 1
    assert value(after, "process_resident_memory_bytes") > 0


def _python() -> str:
    return f"{platform.python_implementation()} {platform.python_version()}"


def _version() -> str:
    from reconsume import __version__

    return __version__


def test_metrics_follow_consumers_and_held_pulls(broker: tuple[ServerProcess, str]) -> None:
    server, address = broker

    async def scenario() -> None:
        async with BrokerClient() as consumer, BrokerClient() as producer:
            ok(await consumer.create_topic(server.address, "held", 1))
            ok(await consumer.heartbeat(server.address, "c-1", "g-online", {"held": "*"}))

            async def online() -> bool:
                samples = await asyncio.to_thread(scrape, address)
                return value(samples, "reconsume_consumer_clients", group="g-online") == 1

            await eventually(online, what="consumer counted")
            samples = await asyncio.to_thread(scrape, address)
            assert value(samples, "reconsume_consumer_groups_online") >= 1

            pull = asyncio.create_task(
                consumer.pull(server.address, "g-online", "held", 0, 0, suspend_ms=15_000)
            )

            async def suspended(count: int) -> bool:
                samples = await asyncio.to_thread(scrape, address)
                return value(samples, "reconsume_long_poll_suspended") == count

            await eventually(lambda: suspended(1), what="pull held")
            ok(await producer.send(server.address, "held", b"wake up"))
            assert len(records(ok(await pull))) == 1
            await eventually(lambda: suspended(0), what="held pull released")

        async def offline() -> bool:
            samples = await asyncio.to_thread(scrape, address)
            return value(samples, "reconsume_consumer_clients", group="g-online") == 0

        await eventually(offline, what="consumer gone")

    run(scenario())


def test_healthz_readyz_and_unknown_paths(broker: tuple[ServerProcess, str]) -> None:
    _server, address = broker
    assert get(address, "/healthz")[:2] == (200, "ok\n")
    assert get(address, "/readyz")[:2] == (200, "ok\n")  # no name server: recovered is enough
    assert get(address, "/healthz?verbose=1")[0] == 200
    status, body, headers = get(address, "/healthz", "HEAD")
    assert (status, body, headers["Content-Length"]) == (200, "", "3")
    assert get(address, "/nope")[0] == 404
    status, _body, headers = get(address, "/metrics", "POST")
    assert (status, headers["Allow"]) == (405, "GET, HEAD")
    assert get(address, "/readyz", "DELETE")[0] == 405
    status, body, headers = get(address, "/metrics", Accept="application/openmetrics-text")
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")


GARBAGE = {
    **{f"remoting-{name}": payload for name, payload in MALFORMED_FRAMES.items() if name != "http"},
    "no-version": b"GET /metrics\r\n\r\n",
    "http-2": b"GET /metrics HTTP/2.0\r\n\r\n",
    "bad-header": b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
    "empty": b"\r\n\r\n",
    "huge-head": b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n",
    "binary": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("payload", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_closes_only_its_connection(
    broker: tuple[ServerProcess, str], payload: bytes
) -> None:
    server, address = broker
    host, _, port = address.rpartition(":")
    kept = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        kept.request("GET", "/healthz")
        assert kept.getresponse().read() == b"ok\n"
        answer = raw_http(address, payload)
        assert answer in (b"",) or answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
        assert b"Connection: close" in answer or answer == b""
        kept.request("GET", "/healthz")  # the same keep-alive connection still serves
        assert kept.getresponse().read() == b"ok\n"
    finally:
        kept.close()
    assert get(address, "/readyz")[0] == 200

    async def remoting_still_serves() -> int:
        async with BrokerClient() as client:
            return (await client.send(server.address, "after-garbage", b"fine")).code

    assert run(remoting_still_serves()) == ResponseCode.SUCCESS
    assert server.process.poll() is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_readyz_waits_for_the_name_server_then_sigterm_closes_the_port(tmp_path: Path) -> None:
    namesrv_address = f"127.0.0.1:{free_port()}"  # nothing listens there yet
    server, address = start_broker(tmp_path / "store", "--namesrv", namesrv_address)
    namesrv: ServerProcess | None = None
    try:
        status, body, _headers = get(address, "/readyz")
        assert status == 503
        assert body == f"not registered with any name server yet ({namesrv_address})\n"
        assert get(address, "/healthz")[0] == 200

        async def failure_counted() -> bool:
            samples = await asyncio.to_thread(scrape, address)
            labels = {"namesrv": namesrv_address, "result": "failure"}
            return value(samples, "reconsume_namesrv_registrations_total", **labels) >= 1

        run(eventually(failure_counted, what="a failed registration counted"))
        assert value(scrape(address), "reconsume_ready") == 0

        namesrv = start_server("namesrv", "--listen", namesrv_address)

        async def ready() -> bool:
            return (await asyncio.to_thread(get, address, "/readyz"))[0] == 200

        run(eventually(ready, timeout_s=20, what="/readyz 200 after the name server came up"))
        samples = scrape(address)
        labels = {"namesrv": namesrv_address, "result": "success"}
        assert value(samples, "reconsume_namesrv_registrations_total", **labels) >= 1
        assert value(samples, "reconsume_ready") == 1
    finally:
        assert server.stop() == 0, "".join(server.output)
        if namesrv is not None:
            assert namesrv.stop() == 0
    host, _, port = address.rpartition(":")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()


def test_an_http_port_in_use_fails_the_start_naming_the_setting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [
            RECONSUME, "broker", "--listen", "127.0.0.1:0", "--store-dir", str(tmp_path),
            "--http-listen", f"127.0.0.1:{port}",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1, result.stderr
    assert f"setting http_listen: cannot listen on 127.0.0.1:{port}" in result.stderr
