"""grpc-js, Node's gRPC (its HTTP/2 is Node's own, nghttp2), against the broker's own HTTP/2
and gRPC server: unary calls of 5 bytes and of 3 MiB, a status with its message, an unknown
method, a server stream of 3.1 MiB refilling the client's windows, a bidirectional call and
2,000 concurrent calls — another HTTP/2 implementation than grpcio's and the Java client's
Netty."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from ..integration.grpc_support import Running, serve
from .conftest import NodeProject


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    with serve() as served:
        yield served


def test_grpc_js_calls_every_kind_of_method(running: Running, grpc_js: NodeProject) -> None:
    done = subprocess.run(
        [grpc_js.node, str(grpc_js.script("grpc_js.js")), f"127.0.0.1:{running.port}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {
        "echo": "hello",
        "bigEqual": True,
        "fail": [9, "not now"],  # FAILED_PRECONDITION
        "nothing": 12,  # UNIMPLEMENTED
        "chunks": [0, 50, True],
        "chat": ["eno", "owt", "eerht"],
        "concurrent": 2000,
    }
