"""The broker's own Python cost per request, in-process, without sockets or a second process.

    python -m bench.broker_requests [-n 20000] [--repeats 5]
    python -m bench.broker_requests --instructions          # valgrind: instructions each
    PYTHONPATH=/tmp/before/broker_image python -m bench.broker_requests   # another library

A broker's request handlers run on one :class:`Connection` whose transport only collects
what is written; the frames fed to it are the bytes reconsume's producer and push consumer
send (SEND_MESSAGE_V2 of a 1 KiB body with a tag and a unique key; PULL_MESSAGE of 32 from
a filled queue, with the commit-offset flag). CPU µs per request of the calling thread,
best and median of the runs: what ``bench.client_throughput`` runs through the broker per
request, minus the kernel's socket work and the wake-ups between processes. A third line
times the client's side of a pull: decoding the records of a pull response
(``reconsume.message.decode``), per record. A fourth is a SEND_BATCH_MESSAGE of 256 messages
of 1 KiB with the properties a dead-letter job's re-send carries, per message.

Then a master under Sync replication (Async flush), per send: a read of 8 sends (8 producer
threads on one connection, as Apache RocketMQ's Java client sends them) or of one, the held
``REPLICATE_LOG`` answered with them, the replica's next request acknowledging them and
releasing their answers; with the writes each costs (a loopback write also runs the receiver's
TCP path in the kernel, which instruction counts do not see). The last line is the replica's
side of it, per send: a ``REPLICATE_LOG`` answer carrying the master's log of 8 sends read,
checked, written to its own log and indexed, and the next request acknowledging them written
(:class:`~reconsume.broker.replica_exchange.Exchange`, as a replica's connection runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, DEFAULT_OUT, body_of, data_dir, median
from reconsume.broker.context import BrokerContext
from reconsume.broker.follower import Follower
from reconsume.broker.handlers import guarded
from reconsume.broker.pull import PullProcessor
from reconsume.broker.replica_exchange import Exchange
from reconsume.broker.replicas import ReplicaSet
from reconsume.broker.replication import ReplicationProcessor
from reconsume.broker.send import SendProcessor
from reconsume.broker.settings import BrokerSettings
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.batch import BatchItem, encode_batch
from reconsume.message.decode import iter_records
from reconsume.store import MessageStore
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.wire.broker_headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import FLAG_RESPONSE, RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.frame import decode_frame, encode_frame
from reconsume.wire.transport import Connection

TOPIC = "BenchRequests"
QUEUES = 8
RECORDS_PER_PULL = 32
BATCH = 256
"""Messages of a SEND_BATCH_MESSAGE (a dead-letter job's batch)."""
REPLICATED = {"replicated8": 8, "replicated1": 1}
"""The replicated cases and the sends of each read."""
REPLICA_RECORDS = 8
"""Records of each ``REPLICATE_LOG`` answer of the replica's case."""


class _Transport:
    """Collects writes; enough of asyncio.Transport for a Connection."""

    def __init__(self) -> None:
        self.written = 0
        self.last = b""
        self.wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.written += 1
        self.last = data
        self.wrote.set()

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def close(self) -> None:
        pass


def send_frame(index: int, body: bytes) -> bytes:
    properties = props.encode_properties({"TAGS": "TagA", "UNIQ_KEY": f"7F0000010000{index:020X}"})
    header = SendMessageRequestHeaderV2(
        producer_group="bench-producer", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=index % QUEUES, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0, properties=properties,
        reconsume_times=0, batch=False, broker_name="bench-broker",
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
    return encode_frame(request)


def batch_frame(index: int, body: bytes) -> bytes:
    """A job's re-send of :data:`BATCH` dead letters (their own properties, a unique key each)."""
    items = [
        BatchItem(0, body, props.encode_properties({
            "TAGS": "timeout", "KEYS": f"order-{index}-{i}",
            "ORIGIN_MESSAGE_ID": f"7F00000100002A9F{index * BATCH + i:016X}",
            "RECONSUME_REPROCESSED": "bench-job",
            "UNIQ_KEY": f"7F0000010000{index * BATCH + i:020X}",
        }))
        for i in range(BATCH)
    ]  # fmt: skip
    header = SendMessageRequestHeaderV2(
        producer_group="bench-producer", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=index % QUEUES, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0, properties="", reconsume_times=0,
        batch=True, broker_name="bench-broker",
    )  # fmt: skip
    request = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE, header.to_ext_fields(), encode_batch(items)
    )
    return encode_frame(request)


def pull_frame(queue_id: int, offset: int) -> bytes:
    header = PullMessageRequestHeader(
        consumer_group="bench-consumer", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=32, sys_flag=0x1 | 0x2 | 0x4, commit_offset=offset,
        suspend_timeout_millis=15_000, subscription="*", sub_version=1, expression_type="TAG",
        broker_name="bench-broker",
    )  # fmt: skip
    return encode_frame(RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields()))


async def _drive(connection: Connection, transport: _Transport, frames: list[bytes]) -> float:
    """Feed every frame, wait until each is answered; the thread's CPU seconds."""
    feed = connection.data_received
    cpu = time.thread_time()
    for frame in frames:
        expected = transport.written + 1
        feed(frame)
        while transport.written < expected:  # an async handler answers from a task
            transport.wrote.clear()
            await transport.wrote.wait()
    return time.thread_time() - cpu


def replicate_frame(offset: int) -> bytes:
    """The replica's next request: the log after ``offset``, everything below it stored."""
    fields = {"replicaId": "bench-replica", "offset": str(offset), "ackOffset": str(offset)}
    fields["maxBytes"] = str(1 << 20)
    return encode_frame(RemotingCommand.request(RequestCode.REPLICATE_LOG, fields))


async def _replicated(
    context: BrokerContext, dispatcher: Dispatcher, sends: list[bytes], per_read: int
) -> tuple[float, int]:
    """CPU seconds and writes of a master answering ``sends``, ``per_read`` to a read, each
    read's acknowledged by its replica before the next."""
    store = context.store
    replicas = ReplicaSet(
        log_end=lambda: store.commitlog.write_offset, sync=True, lag_max_s=10.0,
        accept_alone=False,
    )  # fmt: skip
    processor = ReplicationProcessor(context, replicas, epoch=lambda: 1, hold_s=3600.0)
    dispatcher.register(RequestCode.REPLICATE_LOG, guarded(processor.replicate))
    context.replicas = replicas
    context.log_grew = partial(dispatcher.after_read, processor.log_grew)
    producer, replica = _Transport(), _Transport()
    to_producer, to_replica = Connection(dispatcher), Connection(dispatcher)
    to_producer.connection_made(producer)  # type: ignore[arg-type]
    to_replica.connection_made(replica)  # type: ignore[arg-type]
    to_replica.data_received(replicate_frame(store.commitlog.write_offset))  # joins, held
    await asyncio.sleep(0)
    reads = [b"".join(sends[i : i + per_read]) for i in range(0, len(sends), per_read)]
    cpu = time.thread_time()
    for read in reads:
        answered = producer.written
        to_producer.data_received(read)  # appended; the held request answered
        for _ in range(2):  # a held request's answer may come from a task
            await asyncio.sleep(0)
        to_replica.data_received(replicate_frame(store.commitlog.write_offset))
        for _ in range(2):
            await asyncio.sleep(0)
        if producer.written == answered:
            raise RuntimeError("the replica's acknowledgement answered no send")
    cpu = time.thread_time() - cpu
    context.replicas = None
    return cpu, producer.written + replica.written


def replica_answers(store: MessageStore, count: int, first_opaque: int) -> tuple[list[bytes], int]:
    """``REPLICATE_LOG`` answers carrying the master's first ``count`` records,
    :data:`REPLICA_RECORDS` to an answer, for requests numbered from ``first_opaque`` on; and
    where the last ends."""
    log = store.read_log(store.commitlog.min_offset, 1 << 30)
    frames: list[bytes] = []
    offset = pos = 0
    for index in range(count):
        total = int.from_bytes(log[pos : pos + 4], "big")
        if total <= 0 or pos + total > len(log):
            raise RuntimeError(f"the master's first segment holds {index} records, not {count}")
        pos += total
        if (index + 1) % REPLICA_RECORDS == 0 or index + 1 == count:
            answer = RemotingCommand(
                code=ResponseCode.SUCCESS, opaque=first_opaque + len(frames), flag=FLAG_RESPONSE,
                ext_fields={"offset": str(offset), "maxOffset": str(pos), "epoch": "1"},
                body=log[offset:pos],
            )  # fmt: skip
            frames.append(encode_frame(answer))
            offset = pos
    return frames, pos


async def _replica(
    directory: Path, master: MessageStore, count: int, dry: bool = False
) -> tuple[float, int]:
    """CPU seconds and writes of a replica applying the master's first ``count`` records
    (``dry``: all but applying them)."""
    settings = StoreSettings(flush_mode=FlushMode.ASYNC, commit_log_segment_bytes=64 << 20)
    store = MessageStore(directory, settings, background=False)
    try:
        follower = Follower(store, lambda: None, "bench-replica")
        transport = _Transport()
        connection = Connection(Dispatcher("bench-replica"))
        connection.connection_made(transport)  # type: ignore[arg-type]
        exchange = Exchange(follower, connection, "127.0.0.1:10911")
        exchange.ask(store.replica.restart_stream())
        answers, end = replica_answers(master, count, decode_frame(transport.last).opaque)
        feed = connection.data_received
        cpu = time.thread_time()
        for answer in answers if not dry else ():
            feed(answer)
        cpu = time.thread_time() - cpu
        exchange.close()
        if dry:
            return cpu, 0
        if exchange.ended.done() and not exchange.ended.cancelled():
            raise RuntimeError(f"the replica refused the log: {exchange.ended.exception()}")
        if store.commitlog.write_offset != end or transport.written != len(answers) + 1:
            raise RuntimeError("the replica did not store and acknowledge every answer")
        return cpu, transport.written - 1
    finally:
        store.close()


async def _measure(
    directory: Path, count: int, repeats: int, only: str | None = None, dry: bool = False
) -> dict[str, Any]:
    """CPU µs per request of ``repeats`` runs of ``count`` sends, of ``count`` pulls and per
    record of decoding ``count`` records of a pull response (``only`` one of them, once, for
    instruction counting; ``dry``: set up, measure nothing)."""
    settings = BrokerSettings(store_dir=str(directory), flush_mode=FlushMode.ASYNC)
    store_settings = StoreSettings(flush_mode=FlushMode.ASYNC, commit_log_segment_bytes=64 << 20)
    store = MessageStore(directory, store_settings, background=False)
    result: dict[str, Any] = {"send_us": [], "pull_us": [], "decode_us": [], "batch_us": []}
    result.update({f"{kind}_us": [] for kind in REPLICATED})
    result.update({f"{kind}_writes": 0.0 for kind in REPLICATED})
    result.update(replica8_us=[], replica8_writes=0.0)
    try:
        context = BrokerContext(settings, store, HostAddress.parse("127.0.0.1:10911"), lambda: None)
        context.prepare_default_topic()
        dispatcher = Dispatcher("bench-broker")
        # Wrapped as the broker wraps them (reconsume.broker.server).
        dispatcher.register(RequestCode.SEND_MESSAGE_V2, guarded(SendProcessor(context).send))
        dispatcher.register(RequestCode.PULL_MESSAGE, guarded(PullProcessor(context).pull))
        dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, guarded(SendProcessor(context).send))
        transport = _Transport()
        connection = Connection(dispatcher)
        connection.connection_made(transport)  # type: ignore[arg-type]
        body = body_of(1024)
        sends = [send_frame(i, body) for i in range(count)]
        await _drive(connection, transport, sends[: min(count, 2000)])  # warm-up
        if only in ("pull", "replica8") or (only is None and not dry):
            await _drive(connection, transport, sends)  # messages to pull and replicate
        stored = store.max_offset(TOPIC, 0)
        pulls = [pull_frame(i % QUEUES, (i // QUEUES * 32) % (stored - 32)) for i in range(count)]
        await _drive(connection, transport, pulls[:100])  # warm-up
        runs = 0 if dry else 1 if only else repeats
        for _ in range(runs if only in (None, "send") else 0):
            result["send_us"].append(await _drive(connection, transport, sends) / count * 1e6)
        for _ in range(runs if only in (None, "pull") else 0):
            result["pull_us"].append(await _drive(connection, transport, pulls) / count * 1e6)
        # What the push consumer does with a pull response body (client side, message layer).
        pulled = decode_frame(transport.last).body
        bodies = count // RECORDS_PER_PULL
        for _ in range(runs if only in (None, "decode") else 0):
            cpu = time.thread_time()
            for _ in range(bodies):
                list(iter_records(pulled))
            cpu = time.thread_time() - cpu
            result["decode_us"].append(cpu / (bodies * RECORDS_PER_PULL) * 1e6)
        batches = [batch_frame(i, body) for i in range(max(1, count // BATCH))]
        await _drive(connection, transport, batches[:2])  # warm-up
        for _ in range(runs if only in (None, "batch") else 0):
            cpu = await _drive(connection, transport, batches)
            result["batch_us"].append(cpu / (len(batches) * BATCH) * 1e6)
        for kind, per_read in REPLICATED.items():
            for _ in range(runs if only in (None, kind) else 0):
                cpu, writes = await _replicated(context, dispatcher, sends, per_read)
                result[f"{kind}_us"].append(cpu / count * 1e6)
                result[f"{kind}_writes"] = writes / count
        # dry: the replica's set-up alone, and only in replica8's own dry run
        replica_runs = runs if only in (None, "replica8") else 0
        for index in range(1 if dry and only == "replica8" else replica_runs):
            replica_dir = directory / f"replica-{index}"
            cpu, writes = await _replica(replica_dir, store, count, dry)
            result["replica8_us"].append(cpu / count * 1e6)
            result["replica8_writes"] = writes / count
    finally:
        store.close()
    return result


def _instructions(kind: str, count: int) -> int:
    """Instructions per request under cachegrind: a run minus its dry run (needs valgrind;
    deterministic to well under 1 %, unlike timings on a shared machine)."""

    def run(*extra: str) -> int:
        done = subprocess.run(
            [
                "valgrind", "--tool=cachegrind", "--cache-sim=no",
                "--cachegrind-out-file=/dev/null", sys.executable, "-m", "bench.broker_requests",
                "--only", kind, "-n", str(count), *extra,
            ],
            cwd=BENCH_DIR.parent,
            env=dict(os.environ, PYTHONHASHSEED="0"),
            check=True,
            capture_output=True,
            text=True,
        )  # fmt: skip
        line = next(x for x in done.stderr.splitlines() if "I   refs:" in x)
        return int(line.split()[-1].replace(",", ""))

    return (run() - run("--dry")) // count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker_requests", description=__doc__)
    parser.add_argument("-n", type=int, default=20_000, help="requests per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per request under valgrind instead of timing (n=2000)",
    )
    kinds = ("send", "pull", "decode", "batch", *REPLICATED, "replica8")
    parser.add_argument("--only", choices=kinds, help=argparse.SUPPRESS)
    parser.add_argument("--dry", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    labels = {
        "send": "SEND_MESSAGE_V2 (1 KiB), broker",
        "pull": "PULL_MESSAGE (32 of 1 KiB), broker",
        "decode": "decoding a pulled record, client (message.decode.iter_records)",
        "batch": f"SEND_BATCH_MESSAGE ({BATCH} of 1 KiB), broker, per message",
        "replicated8": "SEND_MESSAGE_V2 under Sync replication, 8 a read, master",
        "replicated1": "SEND_MESSAGE_V2 under Sync replication, 1 a read, master",
        "replica8": f"its log applied, {REPLICA_RECORDS} sends an answer, replica, per send",
    }
    if args.instructions:
        for kind, label in labels.items():
            print(f"{label}: {_instructions(kind, min(args.n, 2048)):,} instructions each")
        return
    with data_dir(DEFAULT_OUT / "data", "requests") as directory:
        result = asyncio.run(_measure(directory, args.n, args.repeats, args.only, args.dry))
    for kind, label in labels.items():
        runs = result[f"{kind}_us"]
        if runs:
            writes = result.get(f"{kind}_writes")
            extra = "" if writes is None else f", {writes:.2f} writes each"
            print(f"{label}: best {min(runs):.1f} median {median(runs):.1f} CPU µs each{extra}")


if __name__ == "__main__":
    main()
