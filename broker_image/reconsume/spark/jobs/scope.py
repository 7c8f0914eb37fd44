"""What one run of a dead-letter job covers, and marking it handled.

A run's scope is fixed when it starts: per queue of ``%DLQ%<group>``, from the offset the
group's dead-letter jobs have handled (the committed offset of ``%DLQ%<group>``) to the
queue's max offset then, at most ``maxMessages`` in all, less what earlier filtered runs
acknowledged past that offset (:mod:`reconsume.store.acked`: not read again). Only after the
run's work is done (archive committed, messages sent) does it mark what it handled: a run
without a filter moves the committed offsets to the scope's end; a filtered one acknowledges
the dead letters it handled, and those it did not stay where they are, with their ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reconsume.client.acked import Acked, ack_offsets, query_acked
from reconsume.client.admin import AdminClient
from reconsume.client.routes import MessageQueue
from reconsume.errors import InvalidArgumentError
from reconsume.message.configs import PERM_READ_WRITE, TopicConfig
from reconsume.message.names import dead_letter_job_group, dead_letter_topic
from reconsume.message.offset_ranges import Range, covered
from reconsume.spark import ledger
from reconsume.spark.offsets import QueueKey, TopicOffsets


class UnknownGroupError(InvalidArgumentError):
    """No broker knows the consumer group."""


@dataclass(frozen=True, slots=True)
class QueueScope:
    key: QueueKey
    address: str
    start: int
    end: int
    acked: tuple[Range, ...] = ()
    """Offsets past ``start`` a filtered run handled before (read no more)."""

    def __len__(self) -> int:
        return max(0, self.end - self.start - covered(self.acked, self.start, self.end))


@dataclass(frozen=True, slots=True)
class Scope:
    group: str
    queues: tuple[QueueScope, ...]
    ledger_start: tuple[tuple[str, str, int], ...] = ()
    """Per broker holding dead letters: (name, address, first ledger offset of this run)."""

    @property
    def topic(self) -> str:
        return dead_letter_topic(self.group)

    @property
    def size(self) -> int:
        return sum(len(q) for q in self.queues)

    @property
    def brokers(self) -> dict[str, str]:
        return {q.key.broker: q.address for q in self.queues}

    def committed(self) -> dict[QueueKey, int]:
        return {q.key: q.start for q in self.queues}

    def skip_json(self) -> str:
        """The data source's ``skipOffsets``: what earlier filtered runs handled in scope."""
        return json.dumps({str(q.key): [list(r) for r in q.acked] for q in self.queues if q.acked})

    def starting(self) -> TopicOffsets:
        return TopicOffsets.of(self.topic, {q.key: q.start for q in self.queues})

    def ending(self) -> TopicOffsets:
        return TopicOffsets.of(self.topic, {q.key: q.end for q in self.queues})

    def limited(self, ends: dict[QueueKey, int]) -> Scope:
        """This scope ending no later than ``ends`` (a failed attempt's scope, finished first)."""
        queues = tuple(
            replace(q, end=max(q.start, min(q.end, ends.get(q.key, q.end)))) for q in self.queues
        )
        return Scope(self.group, queues, self.ledger_start)

    def advanced(self, ends: dict[QueueKey, int]) -> Scope:
        """This scope with the starts moved to ``ends`` (a crashed attempt's finished part)."""
        queues = tuple(
            replace(q, start=max(q.start, min(ends.get(q.key, q.start), q.end)))
            for q in self.queues
        )
        return Scope(self.group, queues, self.ledger_start)


async def plan(
    admin: AdminClient, group: str, *, max_messages: int | None, prepare_ledger: bool
) -> Scope:
    """The scope of a run over ``group``'s dead letters; with ``prepare_ledger`` the ledger
    topic is created on the brokers holding them that lack it."""
    topic = dead_letter_topic(group)
    route = await admin.route(topic)
    if route is None:
        await _check_known(admin, group)
        return Scope(group, ())
    api = admin.broker_api
    job_group = dead_letter_job_group(group)
    queues: list[QueueScope] = []
    budget = max_messages
    for queue in sorted(route.read_queues, key=lambda q: (q.broker_name, q.queue_id)):
        address = route.master_of(queue.broker_name)
        if address is None:
            raise InvalidArgumentError(f"broker {queue.broker_name} of {topic} has no master")
        low = await api.min_offset(address, queue)
        high = await api.max_offset(address, queue)
        acked = await query_acked(api, address, job_group, queue)
        if acked is None:  # a broker that keeps no acknowledged offsets
            acked = Acked(await admin.committed_offset_at(address, job_group, queue))
        start = min(max(low, acked.committed), high)
        held = tuple((max(s, start), e) for s, e in acked.ranges if e > start)
        end = high if budget is None else _budget_end(start, high, held, budget)
        if budget is not None:
            budget -= end - start - covered(held, start, end)
        key = QueueKey(queue.broker_name, queue.queue_id)
        queues.append(QueueScope(key, address, start, end, tuple(r for r in held if r[0] < end)))
    brokers = sorted({(q.key.broker, q.address) for q in queues})
    if prepare_ledger:
        await _create_ledger(admin, [address for _, address in brokers])
    starts = []
    for name, address in brokers:
        queue = MessageQueue(ledger.LEDGER_TOPIC, name, 0)
        starts.append((name, address, await admin.committed_offset_at(address, job_group, queue)))
    return Scope(group, tuple(queues), tuple(starts))


def _budget_end(start: int, high: int, held: tuple[Range, ...], budget: int) -> int:
    """Where a queue's scope ends to hold at most ``budget`` offsets not acknowledged yet."""
    end = min(high, start + budget)
    while end < high and end - start - covered(held, start, end) < budget:
        end = min(high, start + budget + covered(held, start, end))
    return end


async def _create_ledger(admin: AdminClient, addresses: list[str]) -> None:
    """Create the ledger topic on the brokers at ``addresses`` that do not have it yet.
    Creating a topic needs an admin account, reading a broker's topics any account: a job
    signing with an account limited to its group finds the ledger created beforehand."""
    lacking = [
        address
        for address in addresses
        if ledger.LEDGER_TOPIC not in await admin.topic_configs(address)
    ]
    if lacking:
        config = TopicConfig(ledger.LEDGER_TOPIC, 1, 1, PERM_READ_WRITE)
        await admin.update_topic(config, brokers=lacking)


async def _check_known(admin: AdminClient, group: str) -> None:
    """A dead-letter topic nobody routes is empty when the group exists."""
    for broker in await admin.brokers():
        if broker.master is not None and group in await admin.group_configs(broker.master):
            return
    raise UnknownGroupError(f"no broker knows consumer group {group}")


async def ledger_entries(admin: AdminClient, scope: Scope) -> list[ledger.Entry]:
    """The ledger entries written since the last finished run over ``scope``'s group."""
    entries: list[ledger.Entry] = []
    for name, address, start in scope.ledger_start:
        entries.extend(
            await ledger.read_entries(
                admin.broker_api, address, name, start=start, group=scope.group
            )
        )
    return entries


async def mark_handled(admin: AdminClient, scope: Scope) -> None:
    """Move the jobs' offsets to the end of ``scope`` and past the ledger entries of this run."""
    job_group = dead_letter_job_group(scope.group)
    for queue in scope.queues:
        mq = MessageQueue(scope.topic, queue.key.broker, queue.key.queue_id)
        await admin.set_committed_offset_at(queue.address, job_group, mq, queue.end)
    await _past_the_ledger(admin, scope)


ACK_CHUNK = 50_000
"""Ranges per acknowledgement request."""


async def acknowledge(
    admin: AdminClient, scope: Scope, handled: Mapping[QueueKey, Sequence[Range]]
) -> None:
    """Acknowledge what a filtered run handled (the others stay where they are, unhandled) and
    move the jobs' offsets past the ledger entries of this run."""
    job_group = dead_letter_job_group(scope.group)
    for queue in scope.queues:
        ranges = list(handled.get(queue.key, ()))
        mq = MessageQueue(scope.topic, queue.key.broker, queue.key.queue_id)
        for at in range(0, len(ranges), ACK_CHUNK):
            await ack_offsets(
                admin.broker_api, queue.address, job_group, mq, ranges[at : at + ACK_CHUNK]
            )
    await _past_the_ledger(admin, scope)


async def _past_the_ledger(admin: AdminClient, scope: Scope) -> None:
    job_group = dead_letter_job_group(scope.group)
    for name, address, _ in scope.ledger_start:
        mq = MessageQueue(ledger.LEDGER_TOPIC, name, 0)
        end = await admin.broker_api.max_offset(address, mq)
        await admin.set_committed_offset_at(address, job_group, mq, end)
