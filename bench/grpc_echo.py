"""A gRPC server's own cost per call: grpcio's asyncio server (what the broker used before) and
``reconsume.wire.h2`` (the broker's own), each in a process of its own on uvloop answering a
unary echo of 1 KiB, driven by grpcio's client from THREADS threads of this process over one
channel. Reported: calls/s and the server process's CPU time per call (user + system, from
/proc), the median of ROUNDS alternating rounds::

    python -m bench.grpc_echo --threads 8 --seconds 8 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import grpc

from bench.common import loadavg

SERVERS = ("grpcio", "reconsume")
BODY = b"x" * 1024

_SERVER = r"""
import asyncio, sys
import uvloop

async def echo(request, context):
    return request

async def main(kind):
    if kind == "grpcio":
        import grpc
        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(echo)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler}),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
    else:
        from reconsume.wire.h2.api import unary
        from reconsume.wire.h2.server import GrpcServer
        same = lambda data: data
        server = GrpcServer({"/bench.Echo/Echo": unary(echo, same, same)})
        port = await server.start("127.0.0.1", 0)
    print(port, flush=True)
    await asyncio.Event().wait()

uvloop.install()
asyncio.run(main(sys.argv[1]))
"""


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(kind: str, threads: int, seconds: float) -> dict[str, float]:
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, kind], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                "/bench.Echo/Echo"
            )
            for _ in range(200):  # connected, warmed
                echo(BODY, timeout=10)
            counts = [0] * threads
            stop = time.monotonic() + seconds

            def run(index: int) -> None:
                while time.monotonic() < stop:
                    echo(BODY, timeout=10)
                    counts[index] += 1

            workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
            before = _cpu_s(server.pid)
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            used = _cpu_s(server.pid) - before
        calls = sum(counts)
        return {"calls_per_s": calls / seconds, "server_cpu_us_per_call": used / calls * 1e6}
    finally:
        server.kill()
        server.wait()


def run(threads: int, seconds: float, rounds: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = {kind: [] for kind in SERVERS}
    load = loadavg()
    for _ in range(rounds):
        for kind in SERVERS:
            rows[kind].append(one_round(kind, threads, seconds))
    summary = {
        kind: {
            key: statistics.median(row[key] for row in rows[kind])
            for key in ("calls_per_s", "server_cpu_us_per_call")
        }
        for kind in SERVERS
    }
    return {"threads": threads, "seconds": seconds, "rounds": rows, "median": summary,
            "loadavg_start": load, "loadavg_end": loadavg()}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_echo", description=__doc__)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.threads, args.seconds, args.rounds)
    for kind, row in result["median"].items():
        print(
            f"{kind:10} {row['calls_per_s']:9,.0f} calls/s  "
            f"{row['server_cpu_us_per_call']:6.0f} µs server CPU per call"
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
