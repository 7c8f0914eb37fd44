"""Failover soak: three brokers of one name elect their master over a lease file (Sync
replication, Sync flush) while two producers send without pause and one push consumer group
consumes with a listener that fails some messages once and others every time. The master is
SIGKILLed again and again: each time an in-sync replica takes over, and the killed broker is
started again on its store and rejoins as a replica.

Afterwards no acknowledged send is missing (checked by id) from the final master's log nor from
the replicas it lists in sync, every message meant to succeed was consumed (the fail-once ones
on a retry), and every message meant to fail is in ``%DLQ%<group>`` once the group's maximum of
reconsume times was reached, never before. Duplicates are allowed (at least once): they are
counted and printed with the kills, the failover times and the totals. And the consumer never
goes long without a message: after each failover it reads from the new master within seconds."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeFrom, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.errors import ReconsumeError
from reconsume.message import properties as props
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.decode import decode_record
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic
from reconsume.store import MessageStore

from ..polling import eventually_async
from .cluster import lease, start_broker
from .processes import ServerProcess, start_server
from .retry_support import TEST_DELAY_LEVELS, read_queue, retry_flags
from .wire_client import BrokerClient

NAME = "soak"
TOPIC = "orders"
GROUP = "soak-consumer"
DEAD_LETTERS = dead_letter_topic(GROUP)
QUEUES = 4
BROKERS = 3
KILLS = 20
LEASE_MS = 1500
MAX_TIMES = 2
"""The group's maximum of reconsume times (its ``retryMaxTimes``, and the consumer's)."""

READY_S = 60.0
"""A master registered and both other brokers in sync (the last one started has caught up)."""
FAILOVER_S = 30.0
"""From the SIGKILL to a new master registered with the name server."""
DRAIN_S = 150.0
"""From the producers' stop to every acknowledged message consumed or dead-lettered."""
STALL_S = 15.0
"""The longest the listener may go without a message while there is something to consume. A
failover takes about the lease's duration (1.5 s), a pull that failed is tried again after a
few seconds; the consumer's heartbeat and rebalance intervals (30 s and 20 s) are longer."""

OK, ONCE, DEAD = "ok", "once", "dead"
"""Always consumed; failed on the first delivery, consumed on a retry; failed every time."""
KINDS = (OK, ONCE, DEAD)


def kind_of(seq: int) -> str:
    return ONCE if seq % 10 == 1 else DEAD if seq % 10 == 7 else OK


def kind_in(body: bytes) -> str:
    return body.split(b"/", 1)[0].decode()


@dataclass
class Ledger:
    """What the producers had acknowledged and what the listener saw, by message id."""

    acked: dict[str, str] = field(default_factory=dict)
    """Acknowledged sends: id -> kind."""
    send_failures: Counter[str] = field(default_factory=Counter)
    deliveries: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    """Every delivery's reconsume times, in order."""
    consumed: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    """The reconsume times of each successful consumption."""
    delivered_at: list[float] = field(default_factory=list)
    """When the listener was called (monotonic)."""

    async def __call__(
        self, messages: list[StoredMessage], context: ConcurrentContext
    ) -> ConsumeStatus:
        self.delivered_at.append(time.monotonic())
        status = ConsumeStatus.CONSUME_SUCCESS
        for m in messages:
            self.deliveries[m.uniq_key or m.msg_id].append(m.reconsume_times)
            kind = kind_in(m.body)
            if kind == DEAD or (kind == ONCE and m.reconsume_times == 0):
                status = ConsumeStatus.RECONSUME_LATER
        if status is ConsumeStatus.CONSUME_SUCCESS:
            for m in messages:
                self.consumed[m.uniq_key or m.msg_id].append(m.reconsume_times)
        return status

    def longest_stall(self, until: float) -> tuple[float, float]:
        """The longest time without a delivery from the first one to ``until``, and when it
        began."""
        times = [*self.delivered_at, until]
        return max((b - a, a) for a, b in itertools.pairwise(times))

    def of_kind(self, kind: str) -> set[str]:
        return {key for key, k in self.acked.items() if k == kind}

    def outstanding(self, dead_lettered: set[str]) -> dict[str, list[str]]:
        """Acknowledged ids not yet where the group's policy puts them, by kind."""
        return {
            OK: sorted(self.of_kind(OK) - self.consumed.keys()),
            ONCE: sorted(self.of_kind(ONCE) - self.consumed.keys()),
            DEAD: sorted(self.of_kind(DEAD) - dead_lettered),
        }


def describe(missing: dict[str, list[str]]) -> str:
    return "; ".join(
        f"{kind}: {len(ids)} missing, e.g. {ids[:8]}" for kind, ids in missing.items() if ids
    )


def tail(process: ServerProcess, lines: int = 15) -> str:
    return "".join(process.output[-lines:])


@dataclass
class Brokers:
    """The three brokers of ``NAME``; a broker started again keeps its index, store and flags
    (a new port)."""

    namesrv: ServerProcess
    root: Path
    processes: dict[int, ServerProcess] = field(default_factory=dict)
    exited: list[ServerProcess] = field(default_factory=list)
    """Killed processes, kept for their output."""

    async def start(self, index: int) -> ServerProcess:
        """Start broker ``index`` (on its store, with its flags; a new port)."""
        process = await asyncio.to_thread(self._launch, index)
        self.processes[index] = process
        return process

    def _launch(self, index: int) -> ServerProcess:
        return start_broker(
            self.namesrv.address, NAME, self.root / f"b{index}",
            extra=("--election", f"file:{self.root / 'lease.json'}", "--broker-id", str(index),
                   "--replication", "Sync", "--lease-duration-ms", str(LEASE_MS),
                   "--replica-lag-max-ms", "1000", *retry_flags(TEST_DELAY_LEVELS)),
        )  # fmt: skip

    def index_at(self, address: object) -> int | None:
        return next((i for i, p in self.processes.items() if p.address == address), None)

    def check_running(self) -> None:
        """Raises if a broker exited without being killed."""
        for index, process in self.processes.items():
            code = process.process.poll()
            if code is not None and process not in self.exited:
                raise AssertionError(f"b{index} exited with {code}:\n{tail(process, 40)}")

    def state(self) -> str:
        logs = "\n".join(f"--- b{i}:\n{tail(p)}" for i, p in sorted(self.processes.items()))
        return f"lease {lease(self.root)}\n{logs}"

    def stop(self, master: int | None) -> None:
        """SIGTERM the replicas, then the master (which then has nobody to hand over to)."""
        for index in sorted(self.processes, key=lambda i: i == master):
            self.processes[index].stop()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    started = Brokers(namesrv, tmp_path)
    try:
        yield started
    finally:
        for process in started.processes.values():
            process.kill()
        namesrv.stop()


async def registered_master(admin: AdminClient) -> str | None:
    return next((b.master for b in await admin.brokers() if b.name == NAME), None)


@dataclass
class Soak:
    brokers: Brokers
    ledger: Ledger
    admin: AdminClient
    failover_s: list[float] = field(default_factory=list)
    stop_sending: asyncio.Event = field(default_factory=asyncio.Event)
    producers: list[asyncio.Task[None]] = field(default_factory=list)

    def check(self) -> None:
        """Raises if a broker exited on its own or a producer failed."""
        self.brokers.check_running()
        for task in self.producers:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise AssertionError("a producer failed") from task.exception()

    async def ready(self) -> int:
        """The master's index once the name server routes to it and the lease lists both
        other brokers in sync."""
        brokers = self.brokers

        async def probe() -> tuple[int] | None:
            document = lease(brokers.root)
            index = brokers.index_at(document.get("address"))
            if index is None or await registered_master(self.admin) != document["address"]:
                return None
            others = {f"{NAME}-{i}" for i in brokers.processes if i != index}
            in_sync = document.get("in_sync") or []
            assert isinstance(in_sync, list)
            return (index,) if others <= set(in_sync) else None

        (index,) = await eventually_async(
            probe,
            READY_S,
            "a registered master with both replicas in sync",
            interval_s=0.05,
            check=self.check,
            detail=brokers.state,
        )
        return index

    async def fail_over(self, index: int) -> None:
        """SIGKILL master ``index``, wait for its successor, start it again."""
        killed = self.brokers.processes[index]
        killed_at = time.monotonic()
        await asyncio.to_thread(killed.kill)
        self.brokers.exited.append(killed)

        async def successor() -> str | None:
            master = await registered_master(self.admin)
            return master if master not in (None, killed.address) else None

        new_master = await eventually_async(
            successor,
            FAILOVER_S,
            f"a new master after SIGKILL of b{index} ({killed.address})",
            interval_s=0.05,
            detail=self.brokers.state,
        )
        self.failover_s.append(time.monotonic() - killed_at)
        assert self.brokers.index_at(new_master) not in (None, index), new_master
        await self.brokers.start(index)

    async def produce(self, name: str) -> None:
        """Send until told to stop; only sends answered with success count as acknowledged."""
        ledger = self.ledger
        async with Producer([self.brokers.namesrv.address], f"soak-{name}") as producer:
            seq = 0
            while not self.stop_sending.is_set():
                kind = kind_of(seq)
                body = f"{kind}/{name}/{seq}".encode()
                seq += 1
                try:
                    result = await producer.send(Message(TOPIC, body))
                except ReconsumeError as exc:
                    ledger.send_failures[type(exc).__name__] += 1
                    await asyncio.sleep(0.05)  # back off, then go on with the next message
                else:
                    ledger.acked[result.msg_id] = kind


async def dead_letters(client: BrokerClient, master: str) -> list[StoredMessage]:
    return await read_queue(client, master, DEAD_LETTERS)


def stored(store: MessageStore, topic: str) -> list[StoredMessage]:
    """Every message the consume queues of ``topic`` index."""
    found: list[StoredMessage] = []
    for queue in store.queues.of_topic(topic):
        offset = queue.min_offset
        while entries := queue.entries(offset, 4096):
            for phys, size, _tag in entries:
                record = store.commitlog.read(phys, size)
                assert record is not None, (topic, queue.queue_id, offset)
                found.append(decode_record(record))
            offset += len(entries)
    return found


@dataclass
class Outcome:
    master: int
    in_sync: list[int]
    stats: str
    drained_s: float
    stall_s: float
    """The longest time the listener got no message, from the first to the last one."""
    stall_at: float
    """How far into the run that began."""
    epoch: int
    """The lease's epoch at the end: 1 + KILLS, unless a master lost its lease on its own."""


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_twenty_master_kills_lose_no_acknowledged_message_and_keep_the_retry_policy(
    brokers: Brokers,
) -> None:
    ledger = Ledger()
    started = time.monotonic()

    async def scenario() -> tuple[Soak, Outcome]:
        async with AdminClient([brokers.namesrv.address]) as admin:
            soak = Soak(brokers, ledger, admin)
            for i in range(BROKERS):
                await brokers.start(i)
            assert await soak.ready() == 0
            await admin.create_topic(TOPIC, queues=QUEUES)
            await admin.create_group(SubscriptionGroupConfig(GROUP, retry_max_times=MAX_TIMES))

            async def everywhere() -> bool:
                for process in brokers.processes.values():
                    if TOPIC not in await admin.topic_configs(process.address):
                        return False
                    if GROUP not in await admin.group_configs(process.address):
                        return False
                return True

            await eventually_async(everywhere, 20, "topic and group on every broker")

            settings = ConsumerSettings(
                consume_from=ConsumeFrom.FIRST_OFFSET,
                max_reconsume_times=MAX_TIMES,
                persist_interval_s=0.2,
                local_retry_delay_s=1.0,
                instance_name="soak",
            )
            consumer = PushConsumer([brokers.namesrv.address], GROUP, settings=settings)
            consumer.subscribe(TOPIC)
            consumer.register_listener(ledger)
            async with consumer, BrokerClient() as client:
                soak.producers = [
                    asyncio.create_task(soak.produce(name), name=f"producer-{name}")
                    for name in ("p1", "p2")
                ]
                await eventually_async(
                    lambda: len(ledger.consumed) >= 50, 30, "first messages consumed"
                )
                for _ in range(KILLS):
                    await soak.fail_over(await soak.ready())
                    soak.check()
                await soak.ready()  # the last one started is back in sync
                soak.stop_sending.set()
                await asyncio.gather(*soak.producers)
                stopped_at = time.monotonic()
                last: dict[str, list[str]] = {}

                async def drained() -> bool:
                    master = await registered_master(admin)
                    if master is None:
                        return False
                    dead = {m.uniq_key or "" for m in await dead_letters(client, master)}
                    last.update(ledger.outstanding(dead))
                    return not any(last.values())

                def progress() -> str:
                    return (
                        f"outstanding: {describe(last)}\nconsumer stats: {consumer.stats}\n"
                        f"{brokers.state()}"
                    )

                await eventually_async(
                    drained,
                    DRAIN_S,
                    "every acknowledged message consumed or dead-lettered",
                    interval_s=1.0,
                    check=soak.check,
                    detail=progress,
                )
                drained_at = time.monotonic()
                drained_s = drained_at - stopped_at
            # The master now (one more failover, had it missed renewals while the machine was
            # busy), with both others in sync: its log and theirs are checked.
            master = await soak.ready()
            epoch = lease(brokers.root).get("epoch")
            stall_s, stall_at = ledger.longest_stall(drained_at)
            outcome = Outcome(
                master,
                [i for i in brokers.processes if i != master],
                str(consumer.stats),
                drained_s,
                stall_s,
                stall_at - started,
                epoch if isinstance(epoch, int) else -1,
            )
            await asyncio.to_thread(brokers.stop, master)
            return soak, outcome

    soak, outcome = asyncio.run(scenario())
    elapsed_s = time.monotonic() - started

    with MessageStore(brokers.root / f"b{outcome.master}", background=False) as store:
        in_log = Counter(m.uniq_key or "" for m in stored(store, TOPIC))
        dlq = stored(store, DEAD_LETTERS)
    replica_logs: dict[int, set[str]] = {}
    for index in outcome.in_sync:
        with MessageStore(brokers.root / f"b{index}", background=False) as store:
            replica_logs[index] = {m.uniq_key or "" for m in stored(store, TOPIC)}

    acked = set(ledger.acked)
    by_kind = {kind: ledger.of_kind(kind) for kind in KINDS}
    dead_lettered = Counter(m.uniq_key or "" for m in dlq)
    consumed_twice = sum(len(ledger.consumed[key]) - 1 for key in acked if key in ledger.consumed)
    times = sorted(soak.failover_s)
    print(
        f"\n{len(times)} kills in {elapsed_s:.0f} s (lease epoch {outcome.epoch}); "
        f"failover (SIGKILL to new master) "
        f"min {times[0]:.2f} s, median {statistics.median(times):.2f} s, max {times[-1]:.2f} s\n"
        f"acknowledged {len(acked)} ({', '.join(f'{k} {len(v)}' for k, v in by_kind.items())}); "
        f"failed sends {dict(ledger.send_failures)}; "
        f"stored but unacknowledged {len(in_log.keys() - acked)}\n"
        f"consumed {len(ledger.consumed.keys() & acked)} ({consumed_twice} more than once), "
        f"dead-lettered {len(dead_lettered.keys() & acked)} "
        f"({sum(n - 1 for n in dead_lettered.values())} more than once), "
        f"stored twice {sum(n - 1 for n in in_log.values())}; "
        f"drained {outcome.drained_s:.1f} s after the producers stopped; longest time "
        f"without a delivery {outcome.stall_s:.1f} s (from {outcome.stall_at:.1f} s)\n"
        f"dead letters by reconsume times {dict(Counter(m.reconsume_times for m in dlq))}; "
        f"consumer {outcome.stats}"
    )

    assert len(times) == KILLS
    lost = sorted(acked - in_log.keys())
    assert not lost, (
        f"{len(lost)} acknowledged sends missing from the final master b{outcome.master}: "
        f"{[(key, ledger.acked[key]) for key in lost[:20]]}"
    )
    for index, ids in replica_logs.items():
        missing = sorted(acked - ids)
        assert not missing, f"{len(missing)} acknowledged sends missing from in-sync b{index}"

    # The group's policy: consumed (the fail-once ones on a retry), or dead-lettered after the
    # maximum of reconsume times; nothing else dead-lettered.
    missing = ledger.outstanding(set(dead_lettered))
    assert not any(missing.values()), describe(missing)
    for key in by_kind[ONCE]:
        assert min(ledger.consumed[key]) >= 1, (key, ledger.deliveries[key])
    wrongly_dead = sorted((by_kind[OK] | by_kind[ONCE]) & dead_lettered.keys())
    assert not wrongly_dead, f"dead-lettered though consumed: {wrongly_dead[:20]}"
    for m in dlq:
        key = m.uniq_key or ""
        assert kind_in(m.body) == DEAD, key
        assert m.properties[props.DLQ_ORIGIN_TOPIC] == TOPIC
        assert m.properties[props.DLQ_REASON] == "MAX_RECONSUME_TIMES"
        seen = ledger.deliveries[key]
        assert seen, f"{key} dead-lettered without a delivery"
        # Each retry is a delivered one's reconsume times + 1: every count up to the highest
        # was delivered. The dead letter follows a delivery at the maximum or the one before (a
        # send-back counts the stored message's times, a fallback send the delivered one's + 1),
        # or later when local retries (neither could be stored) raised the delivered one's.
        assert sorted(set(seen)) == list(range(max(seen) + 1)), (key, seen)
        assert MAX_TIMES <= m.reconsume_times <= max(seen) + 1, (key, m.reconsume_times, seen)

    # Every failover left the consumer reading from the new master within seconds.
    assert outcome.stall_s < STALL_S, (
        f"the listener got no message for {outcome.stall_s:.1f} s from {outcome.stall_at:.1f} s "
        f"into the run, while there was something to consume"
    )
