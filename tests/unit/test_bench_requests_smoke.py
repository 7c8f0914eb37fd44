"""``bench.broker_requests`` still runs (in-process, tiny sizes): every line printed, and under
Sync replication with 8 sends to a read the master's writes are batched — one for the 8
answers, one for the replica's — which is what the line reports; the replica writes one
acknowledgement an answer of 8. ``bench.send_syscalls`` reads strace's summary.
``bench.client_floor``'s server answers a route, a consumer group's questions and pulls as a
broker would, with consecutive queue offsets in every answer."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from bench.client_floor import _SERVER
from bench.send_syscalls import _strace_counts

from reconsume.client.admin import AdminClient
from reconsume.client.broker_api import BrokerApi
from reconsume.client.pull import pull_once
from reconsume.client.routes import MessageQueue
from reconsume.wire.codes import RequestCode
from reconsume.wire.endpoints import RemotingClient

ROOT = Path(__file__).resolve().parents[2]


def test_broker_requests_prints_every_case_with_batched_replicated_answers(tmp_path: Path) -> None:
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    done = subprocess.run(
        [sys.executable, "-m", "bench.broker_requests", "-n", "256", "--repeats", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 7, done.stdout
    writes = {
        match.group(1): float(match.group(2))
        for line in lines
        if (match := re.search(r"replication, (\d) a read, master: .* ([\d.]+) writes each", line))
    }
    assert writes == {"8": 0.25, "1": 2.0}, done.stdout
    assert lines[-1].startswith("its log applied, 8 sends an answer, replica"), done.stdout
    assert lines[-1].endswith(", 0.12 writes each"), done.stdout


def test_send_syscalls_reads_strace_summaries(tmp_path: Path) -> None:
    summary = tmp_path / "strace.txt"
    summary.write_text(
        "% time     seconds  usecs/call     calls    errors syscall\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        " 78.82    9.491646         160     59187      7096 futex\n"
        " 15.09    1.817469         204      8887           fdatasync\n"
        "  1.74    0.209746          12     16300           write\n"
        "  0.00    0.000011          11         1           epoll_ctl\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        "100.00   12.042090         118    101716     10402 total\n"
    )
    assert _strace_counts(summary) == {"futex": 59187, "fdatasync": 8887, "write": 16300}


def test_the_floor_server_answers_pulls_with_consecutive_offsets() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE, text=True
    )

    async def scenario() -> None:
        async with AdminClient([address]) as admin:
            route = await admin.route("BenchConsume")
            assert route is not None
            assert len(route.read_queues) == 8
            assert await admin.route("%RETRY%bench-consume") is None
        client = RemotingClient()
        try:
            api = BrokerApi(client)
            heartbeat = {"clientID": "floor-test@1", "consumerDataSet": [], "producerDataSet": []}
            await api.heartbeat(address, heartbeat)
            assert await api.consumer_ids(address, "bench-consume") == ["floor-test@1"]
            answer = await api.call(
                address, RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "bench-consume", "topic": "BenchConsume", "queueId": "3"},
            )  # fmt: skip
            assert answer.ext_fields["offset"] == "0"
            queue = MessageQueue("BenchConsume", "floor", 3)
            first = await pull_once(api, address, queue, 0, group="bench-consume")
            second = await pull_once(
                api, address, queue, first.next_begin_offset, group="bench-consume", max_nums=5
            )
        finally:
            await client.close()
        assert [m.queue_offset for m in first.messages] == list(range(32))
        assert [m.queue_offset for m in second.messages] == list(range(32, 37))
        assert second.next_begin_offset == 37
        assert {m.queue_id for m in first.messages + second.messages} == {3}
        assert all(len(m.body) == 1024 and m.properties["TAGS"] == "bench" for m in first.messages)

    with server:
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "ready"
            asyncio.run(scenario())
        finally:
            server.terminate()
