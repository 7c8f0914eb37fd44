"""Apache RocketMQ 5's gRPC endpoint: its proxy (``rocketmq-proxy``, cluster mode) beside the
name server and broker of :mod:`bench.rocketmq_servers`, all on 127.0.0.1, for the clients that
speak ``apache.rocketmq.v2.MessagingService`` (RocketMQ's 5.x Java and Python clients).

The proxy's jars are Maven Central's ``rocketmq-proxy`` of the servers' release, copied by the
``bench/java/servers-proxy`` module (``make bench-java``, or ``rocketmq_servers.ensure_built``):

    with rocketmq_proxy_servers(data_root) as running:
        create_topic(running, "orders", "FIFO")          # message.type=FIFO
        create_group(running, "orders-group", orderly=True)
        running.endpoint                                 # "127.0.0.1:PORT", the gRPC endpoint
        running.namesrv, running.broker.pid, running.proxy.pid

The proxy runs in cluster mode (``-pc rmq-proxy.json``, see :func:`proxy_conf`): it keeps no
messages, but asks the name server for routes and the broker for topic and group settings, and
serves sends, pops, acks and invisible-time changes by the broker's remoting protocol. It is
ready once its gRPC port answers ``QueryRoute`` for ``bench-broker`` (the topic named after the
broker, there once the broker has registered with the name server). Its log is
``running.proxy_home/logs/rocketmqlogs/proxy.log``; every file of the three servers is under a
fresh directory of ``data_root``, removed when they stop.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.common import data_dir
from bench.rocketmq_servers import (
    _G1,
    DELAY_LEVELS,
    PROXY_LIB,
    STOP_TIMEOUT_S,
    _any_port,
    _bindable,
    _start_java,
    admin_command,
    broker_conf,
    free_ports,
    start_broker,
    start_namesrv,
)
from bench.servers import Server
from reconsume.client.admin import AdminClient

PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
PROXY_JVM = ("-server", "-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", *_G1)
"""runserver.sh's options (``bin/mqproxy`` runs the proxy through it), with a 1 GiB heap: in
cluster mode the proxy holds only caches of routes and settings."""
CLUSTER = "bench"
"""The broker's ``brokerClusterName`` (see ``rocketmq_servers.broker_conf``)."""
BROKER_TOPIC = "bench-broker"
"""The topic named after the broker (``brokerTopicEnable``), there once the broker has
registered with the name server: the proxy's readiness probe (it refuses to route system topics
such as ``TBW102``)."""
_PROXY_STARTED = re.compile(r"rocketmq-proxy startup successfully")
READY_TIMEOUT_S = 60.0
QUERY_ROUTE = "/apache.rocketmq.v2.MessagingService/QueryRoute"
CODE_OK = 20000
"""``apache.rocketmq.v2.Code.OK``."""
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
"""The values of a topic's ``message.type`` attribute. The proxy refuses a send whose kind
(a message group, a delivery timestamp) is not its topic's type (``enableTopicMessageTypeCheck``),
and a FIFO consumer group needs ``consumeMessageOrderly`` for its messages to come in order."""


@dataclass
class RunningProxy:
    namesrv: str
    """The name server's address, ``127.0.0.1:PORT``."""
    broker: Server
    proxy: Server
    endpoint: str
    """The proxy's gRPC endpoint, ``127.0.0.1:PORT``: what a 5.x client is given."""
    remoting: str
    """The proxy's remoting endpoint (4.x clients may use it as a name server and broker)."""
    flush_mode: str
    store: Path
    """The broker's store directory."""
    home: Path
    """The directory of every server's files (removed when they stop); the name server's and
    the broker's logs are under ``home/logs``."""
    proxy_home: Path
    """The proxy's user.home: its log is ``proxy_home/logs/rocketmqlogs/proxy.log``."""

    @property
    def proxy_log(self) -> Path:
        return self.proxy_home / "logs" / "rocketmqlogs" / "proxy.log"


def proxy_conf(
    namesrv_port: int,
    grpc_port: int,
    remoting_port: int,
    settings: Mapping[str, object] | None = None,
) -> str:
    """rmq-proxy.json of a cluster-mode proxy in front of the broker of ``broker_conf``.

    ``useEndpointPortFromRequest``: a route names the port the client dialled rather than
    ``grpcServerPort``, so a client may reach the proxy through a relay (the proxy answers
    ``QueryRoute`` with the endpoints of the request). ``localServeAddr`` and
    ``remotingAccessAddr``: 127.0.0.1 rather than the machine's first address. ``settings``:
    more of ``ProxyConfig``'s fields, or other values of these (e.g.
    ``minInvisibleTimeMillsForRecv``, 10 s by default: the least invisible duration a
    ReceiveMessage may ask)."""
    config = {
        "rocketMQClusterName": CLUSTER,
        "proxyClusterName": "bench-proxy",
        "proxyName": "bench-proxy",
        "proxyMode": "cluster",
        "namesrvAddr": f"127.0.0.1:{namesrv_port}",
        "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port,
        "localServeAddr": "127.0.0.1",
        "remotingAccessAddr": "127.0.0.1",
        "useEndpointPortFromRequest": True,
        "enablePrintJstack": False,
        **(settings or {}),
    }
    return json.dumps(config, indent=2) + "\n"


def proxy_ports(taken: tuple[int, ...]) -> tuple[int, int]:
    """Two ports for the proxy's gRPC and remoting servers (both bind every address), apart
    from ``taken`` (``free_ports``'s, each with its broker span ``p - 2 .. p + 1``)."""
    near = {p + d for p in taken for d in (-2, -1, 0, 1)}
    for _ in range(100):
        ports = (_any_port(), _any_port())
        if ports[0] != ports[1] and not near & set(ports) and all(map(_bindable, ports)):
            return ports
    raise RuntimeError("no free ports for the RocketMQ proxy")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The (field number, varint or bytes) pairs of a protobuf message (wire types 0 and 2;
    fixed-width fields skipped)."""
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        kind = key & 7
        if kind == 0:
            yield key >> 3, varint()
        elif kind == 2:
            size = varint()
            yield key >> 3, data[at : at + size]
            at += size
        else:
            at += {1: 8, 5: 4}[kind]


def query_route_request(topic: str, endpoint: str) -> bytes:
    """A serialized ``QueryRouteRequest`` of ``topic`` (IPv4 ``endpoint``)."""
    host, port = endpoint.rsplit(":", 1)
    address = _field(1, host.encode()) + _encode_varint(2 << 3) + _encode_varint(int(port))
    endpoints = _encode_varint(1 << 3) + _encode_varint(1) + _field(2, address)  # IPv4
    return _field(1, _field(2, topic.encode())) + _field(2, endpoints)


def query_route(endpoint: str, topic: str, timeout_s: float = 5.0) -> tuple[int, str, int]:
    """``QueryRoute`` of ``topic`` at the gRPC ``endpoint``: the status code and message and
    the number of message queues (protobuf by hand: the harness needs no generated classes)."""
    with grpc.insecure_channel(endpoint) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(QUERY_ROUTE)
        metadata = (("x-mq-client-id", "bench-probe"), ("x-mq-language", "JAVA"),
                    ("x-mq-protocol", "v2"))  # fmt: skip
        answer = call(query_route_request(topic, endpoint), timeout=timeout_s, metadata=metadata)
    code, message, queues = 0, "", 0
    for number, value in _fields(answer):
        if number == 1 and isinstance(value, bytes):
            for inner, item in _fields(value):
                if inner == 1 and isinstance(item, int):
                    code = item
                elif inner == 2 and isinstance(item, bytes):
                    message = item.decode(errors="replace")
        elif number == 2:
            queues += 1
    return code, message, queues


def _accepts(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, int(port))) == 0


def wait_route(endpoint: str, topic: str, timeout_s: float = READY_TIMEOUT_S) -> int:
    """Poll until the gRPC ``endpoint`` accepts connections and answers ``QueryRoute`` of
    ``topic`` with OK and at least one queue; the number of queues."""
    deadline = time.monotonic() + timeout_s
    last = "no connection"
    while True:
        if _accepts(endpoint):
            try:
                code, message, queues = query_route(endpoint, topic)
            except grpc.RpcError as failure:
                last = f"gRPC error {failure}"
            else:
                if code == CODE_OK and queues:
                    return queues
                last = f"code {code} {message!r}, {queues} queues"
        else:
            last = f"{endpoint} refuses connections"
        if time.monotonic() > deadline:
            raise RuntimeError(f"the proxy at {endpoint} has no route of {topic}: {last}")
        time.sleep(0.1)


async def wait_registered(namesrv: str, timeout_s: float) -> None:
    """Poll until the name server ``namesrv`` lists a broker of ``CLUSTER``."""
    deadline = time.monotonic() + timeout_s
    async with AdminClient([namesrv], tls=False) as admin:
        while not await admin.brokers(CLUSTER):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no broker of {CLUSTER} registered with {namesrv}")
            await asyncio.sleep(0.05)


def start_proxy(home: Path, conf: Path, grpc_port: int) -> Server:
    """A cluster-mode proxy (``ProxyStartup -pc conf``, the jars of ``PROXY_LIB``) with ``home``
    as its user.home, once it prints that it started."""
    return _start_java(
        PROXY_JVM, home, PROXY_MAIN, conf, f"127.0.0.1:{grpc_port}", lib=PROXY_LIB,
        conf_flag="-pc", ready=_PROXY_STARTED,
    )  # fmt: skip


@contextmanager
def rocketmq_proxy_servers(
    data_root: Path,
    flush_mode: str = "Async",
    delay_levels: str = DELAY_LEVELS,
    proxy_settings: Mapping[str, object] | None = None,
) -> Iterator[RunningProxy]:
    """An Apache RocketMQ name server, broker and cluster-mode proxy (``proxy_settings`` added
    to its rmq-proxy.json) with a fresh store under ``data_root/rocketmq-proxy-<flush mode>-*``,
    yielded once the proxy serves routes."""
    with ExitStack() as stack:
        home = stack.enter_context(
            data_dir(data_root.resolve(), f"rocketmq-proxy-{flush_mode.lower()}")
        )
        namesrv_port, broker_port = free_ports()
        grpc_port, remoting_port = proxy_ports((namesrv_port, broker_port))
        namesrv = start_namesrv(home, namesrv_port)
        stack.callback(namesrv.stop, STOP_TIMEOUT_S)
        conf = home / "broker.conf"
        store = home / "store"
        conf.write_text(
            broker_conf(namesrv_port, broker_port, str(store), flush_mode, delay_levels)
        )
        broker = start_broker(home, conf, broker_port)
        stack.callback(broker.stop, STOP_TIMEOUT_S)
        # The proxy starts by creating its system topics on the brokers the name server lists
        # for its cluster, and exits if there are none yet (the broker registers just after
        # its "boot success").
        asyncio.run(wait_registered(namesrv.address, READY_TIMEOUT_S))
        proxy_home = home / "proxy"
        proxy_home.mkdir()
        proxy_json = proxy_home / "rmq-proxy.json"
        proxy_json.write_text(proxy_conf(namesrv_port, grpc_port, remoting_port, proxy_settings))
        proxy = start_proxy(proxy_home, proxy_json, grpc_port)
        stack.callback(proxy.stop, STOP_TIMEOUT_S)
        try:
            wait_route(proxy.address, BROKER_TOPIC)
        except RuntimeError as failure:
            exited = proxy.process.poll()
            log = proxy_home / "logs" / "rocketmqlogs" / "proxy.log"
            tail = log.read_text(errors="replace").splitlines()[-20:] if log.is_file() else []
            state = "running" if exited is None else f"exited {exited}"
            raise RuntimeError(f"{failure} (proxy {state}):\n" + "\n".join(tail)) from None
        yield RunningProxy(
            namesrv.address, broker, proxy, proxy.address, f"127.0.0.1:{remoting_port}",
            flush_mode, store, home, proxy_home,
        )  # fmt: skip


def mqadmin(running: RunningProxy, *args: str) -> str:
    """``mqadmin <args> -n <name server>`` (its own log under ``running.home``); its output."""
    command = admin_command(*args, "-n", running.namesrv)
    command[1:1] = [f"-Duser.home={running.home}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0 or "Exception" in done.stdout:
        raise RuntimeError(f"mqadmin {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done.stdout


def create_topic(running: RunningProxy, topic: str, message_type: str, queues: int = 8) -> int:
    """Create ``topic`` on the cluster with ``queues`` read and write queues and the
    ``message.type`` attribute ``message_type`` (one of ``MESSAGE_TYPES``); return once the
    proxy routes it (the number of queues it names)."""
    if message_type not in MESSAGE_TYPES:
        raise ValueError(f"message type {message_type!r} is none of {MESSAGE_TYPES}")
    mqadmin(
        running, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", str(queues), "-w", str(queues),
        "-a", f"+message.type={message_type}",
    )  # fmt: skip
    return wait_route(running.endpoint, topic)


def create_group(
    running: RunningProxy, group: str, *, orderly: bool = False, retry_max_times: int = 16
) -> None:
    """Create the subscription group ``group`` on the cluster; ``orderly`` (the broker's
    ``consumeMessageOrderly``) makes it a FIFO group for 5.x consumers."""
    mqadmin(
        running, "updateSubGroup", "-c", CLUSTER, "-g", group, "-o", str(orderly).lower(),
        "-r", str(retry_max_times),
    )  # fmt: skip
