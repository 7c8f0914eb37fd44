"""A broker process's life: SIGKILL under Sync flush and restart, malformed frames, SIGTERM,
config files, invalid settings."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconsume.errors import RemotingError
from reconsume.wire.codes import RequestCode, ResponseCode

from ..scratch import module_dir
from .processes import MALFORMED_FRAMES, RECONSUME, ServerProcess, raw_exchange, start_server
from .wire_client import BrokerClient, eventually, ok, records


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def broker_args(store: Path, *extra: str) -> list[str]:
    return ["broker", "--listen", "127.0.0.1:0", "--store-dir", str(store), *extra]


@pytest.mark.crash
def test_sigkill_under_sync_flush_loses_no_acknowledged_send_nor_persisted_offset(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    args = broker_args(store, "--flush", "Sync", "--offset-persist-interval-ms", "100")
    broker = start_server(*args)
    acked: dict[tuple[int, int], bytes] = {}

    async def load_then_kill() -> None:
        async with BrokerClient() as admin:
            ok(await admin.create_topic(broker.address, "durable", 2))
            ok(await admin.update_offset(broker.address, "g-d", "durable", 0, 5))
            ok(await admin.update_offset(broker.address, "g-d", "durable", 1, 7))
        offsets_file = store / "config" / "consumerOffset.json"

        async def offsets_persisted() -> bool:
            if not offsets_file.exists():
                return False
            table = json.loads(offsets_file.read_text())["offsetTable"]
            return table.get("durable@g-d") == {"0": 5, "1": 7}

        await eventually(offsets_persisted, what="offsets written to disk")

        async def sender(n: int) -> None:
            async with BrokerClient() as client:
                for i in range(10_000):
                    body = b"sender %d message %d" % (n, i)
                    try:
                        response = await client.send(broker.address, "durable", body,
                                                      queue_id=n % 2)  # fmt: skip
                    except RemotingError:
                        return
                    if response.code != ResponseCode.SUCCESS:
                        return
                    acked[(n % 2, int(response.ext_fields["queueOffset"]))] = body

        async def enough_acked() -> bool:
            return len(acked) >= 300

        senders = [asyncio.create_task(sender(n)) for n in range(4)]
        await eventually(enough_acked, what="300 acks")
        broker.process.kill()  # SIGKILL while the senders are mid-flight
        await asyncio.gather(*senders)

    run(load_then_kill())
    broker.kill()
    restarted = start_server(*args)

    async def read_back() -> tuple[dict[tuple[int, int], bytes], list[str]]:
        found: dict[tuple[int, int], bytes] = {}
        async with BrokerClient() as client:
            for queue in (0, 1):
                offset = 0
                while True:
                    response = await client.pull(restarted.address, "g-r", "durable", queue, offset)
                    if response.code != ResponseCode.SUCCESS:
                        break
                    for message in records(response):
                        found[(queue, message.queue_offset)] = message.body
                    offset = int(response.ext_fields["nextBeginOffset"])
            committed = [
                (await client.query_offset(restarted.address, "g-d", "durable", q)).ext_fields[
                    "offset"
                ]
                for q in (0, 1)
            ]
        return found, committed

    try:
        found, committed = run(read_back())
    finally:
        assert restarted.stop() == 0
    assert len(acked) >= 300
    missing = {key: body for key, body in acked.items() if found.get(key) != body}
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {next(iter(missing))}"
    assert committed == ["5", "7"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with module_dir(tmp_path_factory, "frames") as root:
        server = start_server(*broker_args(root / "store"))
        yield server
        assert server.stop() == 0, "".join(server.output)


@pytest.mark.parametrize("payload", MALFORMED_FRAMES.values(), ids=MALFORMED_FRAMES.keys())
def test_malformed_frames_close_only_their_connection(
    broker: ServerProcess, payload: bytes
) -> None:
    async def scenario() -> tuple[bytes, int, int]:
        async with BrokerClient() as survivor, BrokerClient() as newcomer:
            ok(await survivor.create_topic(broker.address, "frames", 1))
            answer = await asyncio.to_thread(raw_exchange, broker.address, payload)
            kept = await survivor.send(broker.address, "frames", b"still here")
            fresh = await newcomer.send(broker.address, "frames", b"and here")
            return answer, kept.code, fresh.code

    answer, kept, fresh = run(scenario())
    assert answer == b""  # closed without a reply
    assert (kept, fresh) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
    assert broker.process.poll() is None


def test_unknown_request_codes_are_answered_not_supported(broker: ServerProcess) -> None:
    async def scenario() -> int:
        async with BrokerClient() as client:
            return (await client.invoke(broker.address, RequestCode.QUERY_MESSAGE)).code

    assert run(scenario()) == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_sigterm_exits_zero_and_the_name_server_drops_the_routes(tmp_path: Path) -> None:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    try:
        # Offsets are not written on their own within the test: only the stop persists them.
        broker = start_server(*broker_args(
            tmp_path / "store", "--namesrv", namesrv.address,
            "--offset-persist-interval-ms", "3600000",
        ))  # fmt: skip

        async def registered() -> None:
            async with BrokerClient() as client:
                ok(await client.create_topic(broker.address, "leaving", 2))
                ok(await client.update_offset(broker.address, "g-leaving", "leaving", 1, 4))
                await eventually(lambda: client.route(namesrv.address, "leaving"))

        async def routes_gone() -> None:
            async with BrokerClient() as client:

                async def gone() -> bool:
                    return await client.route(namesrv.address, "leaving") is None

                await eventually(gone, what="routes dropped")

        run(registered())
        started = time.monotonic()
        assert broker.stop() == 0, "".join(broker.output)
        assert time.monotonic() - started < 10
        run(routes_gone())
        # A clean stop leaves a clean store (checkpoint marked clean, tables persisted).
        inspect = subprocess.run(
            [RECONSUME, "store", "inspect", "--json", str(tmp_path / "store")],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        assert json.loads(inspect.stdout)["recovery"]["cleanShutdown"] is True
        offsets = json.loads((tmp_path / "store" / "config" / "consumerOffset.json").read_text())
        assert offsets["offsetTable"]["leaving@g-leaving"] == {"1": 4}
    finally:
        assert namesrv.stop() == 0


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (["--default-queues", "0"], "default_topic_queue_nums"),
        (["--listen", "127.0.0.1:70000"], "port"),
        (["--namesrv", "nowhere"], "namesrv_addresses"),
        (["--broker-name", "a b"], "broker_name"),
        (["--http-listen", "localhost:8080"], "http_listen"),
        (["--delay-levels", "1s 2q"], "delay_levels"),
        (["--register-interval-s", "nan"], "register_interval_s"),
        (["--offset-persist-interval-ms", "0"], "offset_persist_interval_ms"),
    ],
)
def test_invalid_settings_exit_2_naming_the_setting(
    tmp_path: Path, args: list[str], setting: str
) -> None:
    command = [RECONSUME, "broker", "--listen", "127.0.0.1:0", "--store-dir", str(tmp_path), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2, result.stderr
    assert setting in result.stderr


def test_a_config_file_sets_the_broker_up_and_flags_override_it(tmp_path: Path) -> None:
    with socket.socket() as taken:  # the file's port is in use: only the flag's can work
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = tmp_path / "broker.toml"
        config.write_text(
            f'listen_host = "127.0.0.1"\nlisten_port = {taken.getsockname()[1]}\n'
            f'store_dir = "{tmp_path / "store"}"\ncluster_name = "from-file"\n'
            'http_listen = "127.0.0.1:0"\n\n[store]\nretention_hours = 24\n'
        )
        broker = start_server("broker", "--config", str(config), "--listen", "127.0.0.1:0")

    async def cluster_of_a_stored_message() -> str:
        async with BrokerClient() as client:
            ok(await client.send(broker.address, "configured", b"hello"))
            response = ok(await client.pull(broker.address, "g-c", "configured", 0, 0))
            return records(response)[0].properties["CLUSTER"]

    try:
        assert run(cluster_of_a_stored_message()) == "from-file"
        assert any("serving HTTP on 127.0.0.1:" in line for line in broker.output)
    finally:
        assert broker.stop() == 0, "".join(broker.output)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('listen_prot = 1\nstore_dir = "s"', "setting listen_prot: unknown setting"),
        ('listen_port = "x"\nstore_dir = "s"', "setting listen_port: expected an integer"),
        ('delay_levels = "1s 0s"\nstore_dir = "s"', "setting delay_levels:"),
        ('register_interval_s = -1\nstore_dir = "s"', "setting register_interval_s:"),
        ('[store]\nretention_hours = "x"', "setting store.retention_hours:"),
        ("store_dir = ", "not valid TOML"),
    ],
)
def test_an_invalid_config_file_exits_2_naming_the_setting(
    tmp_path: Path, toml: str, message: str
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(toml)
    command = [RECONSUME, "broker", "--config", str(config), "--store-dir", str(tmp_path / "s")]
    if "store_dir" in toml:
        command = command[:-2]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_a_missing_config_file_exits_2(tmp_path: Path) -> None:
    command = [RECONSUME, "broker", "--config", str(tmp_path / "absent.toml")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert "absent.toml: cannot read it" in result.stderr
