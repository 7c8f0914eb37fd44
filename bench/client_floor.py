"""What Apache RocketMQ's Java client allows a broker on this machine: the side-by-side's
produce and consume cases against a server that answers every request at once and does
nothing else.

The server (a process of its own on uvloop, one small asyncio protocol) is the name server and
the broker at once: a topic's route names itself, a heartbeat is answered, and a send is
answered SEND_OK with an answer encoded in advance (only the opaque differs), without decoding
the message. A pull is answered with as many 1 KiB messages as it asks for, encoded once at the
start (the properties a Java producer's batch leaves on a stored message) with only their queue
offsets written in for each answer, so the push consumer's group finds itself alone, starts at
offset 0 and never waits. The load generator is the side-by-side's (``bench.compare_rocketmq``),
with the same JVM flags, topic and body. No broker can answer faster than this one, so its
msg/s is the most any broker reaches with this client here: against it, a ratio to Apache
RocketMQ that a goal asks for is attainable or not whatever the broker does::

    python -m bench.client_floor --threads 1,8 --seconds 15 --rounds 3 --consume 200000
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import loadavg
from bench.compare_rocketmq import TOPICS
from bench.rocketmq_servers import loadgen_command
from bench.servers import cpu_seconds

_SERVER = r"""
import asyncio, re, sys
import orjson, uvloop
from reconsume.message.address import HostAddress
from reconsume.message.codec import encode_record

PORT = int(sys.argv[1])
ADDRESS = f"127.0.0.1:{PORT}"
ROUTE = orjson.dumps({
    "brokerDatas": [{"brokerAddrs": {"0": ADDRESS}, "brokerName": "floor", "cluster": "floor"}],
    "filterServerTable": {},
    "queueDatas": [{"brokerName": "floor", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0,
                    "writeQueueNums": 8}],
})
SENT = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
        "msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0"}
SENDS = (10, 310)  # SEND_MESSAGE, SEND_MESSAGE_V2
ROUTE_CODE = 105  # GET_ROUTEINFO_BY_TOPIC


def template(ext, body=b"", code=0):
    # the answer's frame around its opaque: the header as fastjson writes it (sorted keys)
    marker = 987654321
    header = orjson.dumps({"code": code, "extFields": ext, "flag": 1, "language": "JAVA",
                           "opaque": marker, "serializeTypeCurrentRPC": "JSON", "version": 0})
    before, after = header.split(str(marker).encode())
    return before, after, body


ANSWERS = {code: template(SENT) for code in SENDS}
ANSWERS[ROUTE_CODE] = template({}, ROUTE)
OTHER = template({})
NO_ROUTE = template({}, b"", code=17)  # TOPIC_NOT_EXIST: the consumer's %RETRY% topic
OFFSET = template({"offset": "0"})  # QUERY_CONSUMER_OFFSET: start at the first message
PULL, HEARTBEAT, CONSUMERS, QUERY_OFFSET = 11, 34, 38, 14

record = encode_record(
    queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0,
    born_timestamp_ms=1_700_000_000_000, born_host=HostAddress(bytes([127, 0, 0, 1]), 40000),
    store_timestamp_ms=1_700_000_000_001, store_host=HostAddress(bytes([127, 0, 0, 1]), PORT),
    reconsume_times=0, prepared_transaction_offset=0, body=bytes(1024), topic="BenchConsume",
    properties="TAGS\x01bench\x02WAIT\x01true\x02UNIQ_KEY\x01"
    "7F000001A1B218B4AAC2712345670000\x02CLUSTER\x01floor",
)
RECORD = len(record)
MESSAGES = bytearray(record * 32)
client_ids = []
CLIENT_ID = re.compile(rb'"clientID"\s*:\s*"([^"]+)"')


def pull_answer(ext, opaque):
    count = min(int(ext.get("maxMsgNums", "32")), 32)
    first = int(ext["queueOffset"])
    queue_id = int(ext["queueId"])
    body = MESSAGES[: count * RECORD]
    for i in range(count):
        at = i * RECORD
        body[at + 12 : at + 16] = queue_id.to_bytes(4, "big")
        body[at + 20 : at + 28] = (first + i).to_bytes(8, "big")
        body[at + 28 : at + 36] = ((first + i) * RECORD).to_bytes(8, "big")
    ext = {"maxOffset": str(1 << 40), "minOffset": "0", "nextBeginOffset": str(first + count),
           "suggestWhichBrokerId": "0"}
    before, after, _ = template(ext)
    return before + str(opaque).encode() + after, bytes(body)


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data):
        buffer = self.buffer
        buffer += data
        out = []
        while len(buffer) >= 4:
            length = int.from_bytes(buffer[:4], "big")
            if len(buffer) < 4 + length:
                break
            header_length = int.from_bytes(buffer[4:8], "big") & 0xFFFFFF
            header = orjson.loads(bytes(buffer[8 : 8 + header_length]))
            request_body = bytes(buffer[8 + header_length : 4 + length])
            del buffer[: 4 + length]
            if header.get("flag", 0) & 2:  # oneway (a consumer's offset commits)
                continue
            code, ext = header["code"], header.get("extFields") or {}
            if code == PULL:
                head, body = pull_answer(ext, header["opaque"])
            else:
                found = CLIENT_ID.search(request_body) if code == HEARTBEAT else None
                if found and found.group(1).decode() not in client_ids:
                    client_ids.append(found.group(1).decode())
                if code == CONSUMERS:
                    answer = template({}, orjson.dumps({"consumerIdList": client_ids}))
                elif code == QUERY_OFFSET:
                    answer = OFFSET
                elif code == ROUTE_CODE and ext.get("topic", "").startswith("%RETRY%"):
                    answer = NO_ROUTE
                else:
                    answer = ANSWERS.get(code, OTHER)
                before, after, body = answer
                head = before + str(header["opaque"]).encode() + after
            out.append((4 + len(head) + len(body)).to_bytes(4, "big")
                       + len(head).to_bytes(4, "big") + head + body)
        if out:
            self.transport.write(b"".join(out))


async def main():
    server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", PORT)
    print("ready", flush=True)
    await server.serve_forever()

uvloop.run(main())
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def against_floor(arguments: list[str], log_root: Path) -> dict[str, Any]:
    """One load generator command (``arguments`` after its ``--namesrv``) against a fresh
    floor server; its JSON with the server's and the client's CPU seconds."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the floor server did not start")
        command = loadgen_command(arguments[0], f"127.0.0.1:{port}", *arguments[1:],
                                  log_root=log_root)  # fmt: skip
        before = os.times()
        server_before = cpu_seconds(server.pid)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        after = os.times()
        if done.returncode != 0:
            raise RuntimeError(f"load generator failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        result["server_cpu_seconds"] = cpu_seconds(server.pid) - server_before
        result["client_cpu_seconds"] = (after.children_user + after.children_system) - (
            before.children_user + before.children_system
        )
        return result
    finally:
        server.terminate()
        server.wait(10)
        if server.stdout is not None:
            server.stdout.close()


def produce(threads: int, seconds: int, log_root: Path) -> dict[str, Any]:
    """The side-by-side's produce case with ``threads`` against the floor."""
    return against_floor(
        ["produce", "--topic", TOPICS[1], "--threads", str(threads), "--seconds", str(seconds),
         "--warmup-seconds", "2"],
        log_root,
    )  # fmt: skip


def consume(messages: int, log_root: Path) -> dict[str, Any]:
    """The side-by-side's consume case (a push consumer of a new group drains ``messages``)
    against the floor."""
    return against_floor(
        ["consume", "--topic", "BenchConsume", "--group", "bench-consume",
         "--messages", str(messages)],
        log_root,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", default="1,8", help="producer threads per case, comma-separated"
    )
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--consume", type=int, default=0, help="messages of the consume case (0: no consume case)"
    )
    args = parser.parse_args()
    print(f"load average at the start: {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="client-floor-") as logs:
        for threads in (int(t) for t in args.threads.split(",") if t):
            runs = [produce(threads, args.seconds, Path(logs)) for _ in range(args.rounds)]
            for run in runs:
                sent = run["sent_total"]
                print(
                    f"threads {threads}: {run['msgs_per_s']:,.0f} msg/s, p50 "
                    f"{run['latency_p50_ms']} ms, p99 {run['latency_p99_ms']} ms; CPU µs/msg "
                    f"server {run['server_cpu_seconds'] / sent * 1e6:.0f}, client (whole "
                    f"command) {run['client_cpu_seconds'] / sent * 1e6:.0f}"
                )
            median = statistics.median(run["msgs_per_s"] for run in runs)
            print(f"threads {threads}: median {median:,.0f} msg/s at {time.strftime('%H:%M:%S')}")
        if args.consume:
            runs = [consume(args.consume, Path(logs)) for _ in range(args.rounds)]
            for run in runs:
                received = run["received"]
                print(
                    f"consume: {run['msgs_per_s']:,.0f} msg/s; CPU µs/msg server "
                    f"{run['server_cpu_seconds'] / received * 1e6:.1f}, client (whole command) "
                    f"{run['client_cpu_seconds'] / received * 1e6:.1f}"
                )
            median = statistics.median(run["msgs_per_s"] for run in runs)
            print(f"consume: median {median:,.0f} msg/s at {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
