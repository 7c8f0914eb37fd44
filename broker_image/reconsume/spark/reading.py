"""Planning and reading queue ranges: what the batch reader (:mod:`reconsume.spark.source`),
the stream reader (:mod:`reconsume.spark.stream`) and the writer (:mod:`reconsume.spark.writer`)
share, in a module of its own so that none of them imports another for it.

:class:`ReadOptions` parses the data source's options (documented in
:mod:`reconsume.spark.source`), :func:`plan_ranges` resolves them to a range per broker queue on
the driver, and :func:`range_batches` (:func:`read_range` without an event loop) pulls one
range in an executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa
from pyspark.sql.datasource import (
    InputPartition,
)

from reconsume.client.admin import AdminClient
from reconsume.client.broker_api import BrokerApi
from reconsume.client.namesrv import RouteCache
from reconsume.client.pull import RawPull, pull_raw
from reconsume.client.routes import MessageQueue
from reconsume.errors import InvalidArgumentError
from reconsume.message.names import dead_letter_topic, validate_group, validate_topic
from reconsume.message.offset_ranges import Range, merge
from reconsume.spark.columns import Columns
from reconsume.spark.offsets import EARLIEST, LATEST, QueueKey, QueueRange, TopicOffsets
from reconsume.wire.endpoints import RemotingClient

DEFAULT_GROUP = "reconsume-spark"
DEFAULT_PULL_BATCH = 256
"""Messages a reader asks for in one pull: its pulls are bulk pulls, of which reconsume's
brokers hand out up to 1,024 (a consumer's, and Apache RocketMQ's, at most 32; a reader learns
such a cap from the first short answer)."""
DEFAULT_PULLS_IN_FLIGHT = 4
"""Pulls a reader keeps outstanding per queue: the next ones travel while one is decoded."""
DEFAULT_BATCH_ROWS = 2048
"""Rows per Arrow record batch a reader yields."""
DEFAULT_TIMEOUT_S = 10.0
_SEPARATORS = re.compile(r"[;,\s]+")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    name_servers: tuple[str, ...]
    topic: str
    dead_letter_group: str | None
    starting: TopicOffsets | int
    ending: TopicOffsets | int
    group: str
    pull_batch: int
    timeout_s: float
    max_per_trigger: int | None = None
    """A stream's maxMessagesPerTrigger (None: no limit)."""
    pulls_in_flight: int = DEFAULT_PULLS_IN_FLIGHT
    skip: Mapping[QueueKey, tuple[Range, ...]] = field(default_factory=dict)
    """Offsets not to read, per queue (option skipOffsets)."""

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        servers = tuple(s for s in _SEPARATORS.split(lowered.get("nameserver", "")) if s)
        if not servers:
            raise InvalidArgumentError("option nameServer (host:port of a name server) is missing")
        topic = lowered.get("topic")
        group = lowered.get("deadlettergroup")
        if (topic is None) == (group is None):
            raise InvalidArgumentError("exactly one of the options topic and deadLetterGroup")
        if group is not None:
            topic = dead_letter_topic(validate_group(group))
        assert topic is not None
        validate_topic(topic)
        if streaming and "endingoffsets" in lowered:
            raise InvalidArgumentError("option endingOffsets is for batch reads, not streams")
        if not streaming and "maxmessagespertrigger" in lowered:
            raise InvalidArgumentError("option maxMessagesPerTrigger is for streams only")
        default_start = "latest" if streaming else "earliest"
        starting = TopicOffsets.parse_option(lowered.get("startingoffsets", default_start), topic)
        ending = TopicOffsets.parse_option(lowered.get("endingoffsets", "latest"), topic)
        if ending == EARLIEST:
            raise InvalidArgumentError("endingOffsets cannot be earliest")
        return cls(
            servers,
            topic,
            group,
            starting,
            ending,
            validate_group(lowered.get("group", DEFAULT_GROUP)),
            positive_option(lowered, "pullbatchsize", DEFAULT_PULL_BATCH, int),
            positive_option(lowered, "timeoutseconds", DEFAULT_TIMEOUT_S, float),
            positive_option(lowered, "maxmessagespertrigger", 0, int) or None,
            positive_option(lowered, "pullsinflight", DEFAULT_PULLS_IN_FLIGHT, int),
            parse_skip(lowered.get("skipoffsets")),
        )


def parse_skip(text: str | None) -> dict[QueueKey, tuple[Range, ...]]:
    """Option skipOffsets: ``{"<brokerName>:<queueId>": [[start, end], ...]}``, queue offsets
    not to read (end excluded): what a dead-letter job acknowledged past its committed offset."""
    if not text:
        return {}
    try:
        document = json.loads(text)
        return {
            QueueKey.parse(str(key)): tuple(merge((), ((int(s), int(e)) for s, e in ranges)))
            for key, ranges in document.items()
        }
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidArgumentError(
            f'option skipOffsets is not {{"<broker>:<queueId>": [[start, end], ...]}}: {exc}'
        ) from exc


_Number = TypeVar("_Number", int, float)


def positive_option(
    options: Mapping[str, str], name: str, default: _Number, kind: type[_Number]
) -> _Number:
    """Option ``name`` (lower-cased) of ``options`` as a positive number; ``default`` when
    absent."""
    text = options.get(name)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"option {name} must be a number, not {text!r}") from exc
    if value <= 0:
        raise InvalidArgumentError(f"option {name} must be positive, not {text!r}")
    return value


def _offset_of(option: TopicOffsets | int, key: QueueKey, default: int) -> int:
    if isinstance(option, TopicOffsets):
        return option.get(key, default)
    return option


async def plan_ranges(options: ReadOptions) -> list[QueueRange]:
    """Every readable queue of the topic with its start and end resolved against the brokers'
    current offsets (empty ranges included), in queue order."""
    client = RemotingClient()
    try:
        api = BrokerApi(client, options.timeout_s)
        routes = RouteCache(client, options.name_servers, timeout_s=options.timeout_s)
        route = await routes.get(options.topic, refresh=True)
        if route is None:
            await _check_known_group(options)
            return []
        ranges: list[QueueRange] = []
        known: set[QueueKey] = set()
        for queue in route.read_queues:
            address = route.master_of(queue.broker_name)
            if address is None:
                raise InvalidArgumentError(f"broker {queue.broker_name} has no master")
            key = QueueKey(queue.broker_name, queue.queue_id)
            known.add(key)
            low = await api.min_offset(address, queue)
            high = await api.max_offset(address, queue)
            start = _resolve(_offset_of(options.starting, key, EARLIEST), low, high)
            end = _resolve(_offset_of(options.ending, key, LATEST), low, high)
            ranges.append(
                QueueRange(options.topic, queue.broker_name, queue.queue_id, address, start, end)
            )
        for option in (options.starting, options.ending):
            if isinstance(option, TopicOffsets):
                unknown = sorted(str(k) for k, _ in option.offsets if k not in known)
                if unknown:
                    raise InvalidArgumentError(f"{options.topic} has no queues {unknown}")
        return ranges
    finally:
        await client.close()


def _resolve(offset: int, low: int, high: int) -> int:
    if offset == EARLIEST:
        return low
    if offset == LATEST:
        return high
    return min(max(offset, low), high)


async def _check_known_group(options: ReadOptions) -> None:
    """A dead-letter topic nobody routes is empty when its group exists (no dead letter yet);
    an unknown topic or group is an error."""
    group = options.dead_letter_group
    if group is None:
        raise InvalidArgumentError(f"no name server routes topic {options.topic}")
    async with AdminClient(options.name_servers, timeout_s=options.timeout_s) as admin:
        for broker in await admin.brokers():
            if broker.master is not None and group in await admin.group_configs(broker.master):
                return
    raise InvalidArgumentError(f"no broker knows consumer group {group}")


class QueueRangePartition(InputPartition):
    """One queue range; its ``value`` is the range's ``to_dict()``."""

    def __init__(self, queue_range: QueueRange) -> None:
        super().__init__(queue_range.to_dict())
        self.queue_range = queue_range


def read_range(
    queue_range: QueueRange, options: ReadOptions, *, skip: Sequence[Range] = ()
) -> Iterator[pa.RecordBatch]:
    """:func:`range_batches` on an event loop of this thread's own, for a caller without one
    (a data source's partition)."""
    loop = asyncio.new_event_loop()
    batches = range_batches(queue_range, options, skip=skip)
    try:
        while True:
            try:
                yield loop.run_until_complete(anext(batches))
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(batches.aclose())
        loop.close()


async def range_batches(
    queue_range: QueueRange,
    options: ReadOptions,
    *,
    skip: Sequence[Range] = (),
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> AsyncGenerator[pa.RecordBatch, None]:
    """The messages in ``queue_range`` but those at the offsets ``skip`` holds (sorted
    disjoint ranges), pulled in order from its broker with up to ``options.pulls_in_flight``
    pulls of ``options.pull_batch`` outstanding, as Arrow record batches of about
    ``batch_rows`` rows."""
    client = RemotingClient()
    api = BrokerApi(client, options.timeout_s)
    queue = MessageQueue(queue_range.topic, queue_range.broker, queue_range.queue_id)
    pulls = _Pipeline(
        api, queue_range, queue, options.group, options.pull_batch, options.pulls_in_flight
    )
    try:
        rows = Columns()
        async with contextlib.aclosing(pulls.answers()) as answers:
            async for body, low, high in answers:
                rows.add(body, low, high, skip)
                if len(rows) >= batch_rows:
                    yield rows.batch(queue_range.broker)
        if len(rows):
            yield rows.batch(queue_range.broker)
    finally:
        await pulls.cancel()
        await client.close()


class _Pipeline:
    """Pulls of one queue range, several in flight, their messages handed out in queue order.

    Each pull asks for the ``pull_batch`` offsets after the one before it. The broker answers
    a pull with fewer messages than asked when a byte limit cuts it short, or moves its next
    offset past a gap (a truncated queue): then the pulls sent ahead start at the wrong place,
    and are dropped and sent again from where the answer says to go on; after an answer cut
    short, pulls ask for no more than it held (a broker's count cap, learned once)."""

    def __init__(
        self,
        api: BrokerApi,
        queue_range: QueueRange,
        queue: MessageQueue,
        group: str,
        pull_batch: int,
        in_flight: int,
    ) -> None:
        self._api = api
        self._range = queue_range
        self._queue = queue
        self._group = group
        self._batch = pull_batch
        self._depth = max(1, in_flight)
        self._pending: deque[tuple[int, asyncio.Task[RawPull]]] = deque()
        self._next = queue_range.start
        """The offset the next pull sent asks from."""

    async def answers(self) -> AsyncGenerator[tuple[bytes, int, int], None]:
        """Each answer's records as the broker sent them, with the offsets of the ones that
        belong to the range: ``[asked, end)``."""
        end = self._range.end
        position = self._range.start
        while position < end:
            self._fill(end)
            asked, pull = self._pending.popleft()
            result = await pull
            yield result.body, asked, end
            if result.next_begin_offset <= asked:
                return  # nothing more stored here (the queue was truncated or reset)
            position = result.next_begin_offset
            following = self._pending[0][0] if self._pending else self._next
            if following != position:
                await self.cancel()  # sent ahead from the wrong place
                self._next = position
                if asked < position < asked + self._wanted(asked, end):
                    # Cut short by the broker's caps (a gap moves past the asked end): ask
                    # for no more than it gave from now on.
                    self._batch = position - asked

    def _fill(self, end: int) -> None:
        while len(self._pending) < self._depth and self._next < end:
            offset = self._next
            wanted = self._wanted(offset, end)
            request = pull_raw(
                self._api, self._range.address, self._queue, offset, group=self._group,
                max_nums=wanted, bulk=True,
            )  # fmt: skip
            pull = asyncio.ensure_future(request)
            self._pending.append((offset, pull))
            self._next = offset + wanted

    def _wanted(self, offset: int, end: int) -> int:
        return min(self._batch, end - offset)

    async def cancel(self) -> None:
        """Drop the pulls in flight (their answers are not waited for)."""
        pending = [pull for _offset, pull in self._pending]
        self._pending.clear()
        for pull in pending:
            pull.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
