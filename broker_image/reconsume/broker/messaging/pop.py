"""Pop consumption for RocketMQ 5's clients: the broker hands a group's messages out, each
invisible for a while, and takes them back unless they are acknowledged in time.

Per (group, topic, queue) a :class:`~reconsume.broker.messaging.leases.QueueCursor` keeps the
next offset to hand out and the leases of messages handed out and not yet done. The group's
committed offset — the same offset table 4.x consumers commit to, which lag, alerts,
ConsumerGroup status and replication read — is the lowest offset still leased, or the cursor
when none is: it never passes a message that may still come back. A group reads its topic's
queues and its ``%RETRY%<group>`` queues on this broker.

A lease that expires (the client neither acknowledged it nor extended it with
ChangeInvisibleDuration) is taken back through the retry engine: its retry —
``reconsumeTimes + 1``, RETRY_TOPIC and ORIGIN_MESSAGE_ID as a 4.x send-back makes it — is
stored in ``%RETRY%<group>`` at once (the invisible duration was its delay); once the
group's ``retryMaxTimes`` is spent it is a dead letter in ``%DLQ%<group>`` instead, with the
origin properties, where dead-letter jobs drain it. A 5.x push consumer asks for its group's
backoff by changing the invisible duration of a message it failed: the retry then comes after
that delay, at its next attempt.

A FIFO group (``consumeMessageOrderly``) reads a queue only while none of its messages is
leased, and an expired lease puts the cursor back on it, its attempt counted here: a failing
message holds its queue until it is acknowledged or, after its last attempt, dead-lettered.

Leases live in memory: after a restart or a failover, what was leased is handed out again from
the committed offset (at-least-once, as after a 4.x consumer's crash).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Container

from reconsume.broker.context import BrokerContext
from reconsume.broker.messaging.leases import Handle, Lease, QueueCursor, Received
from reconsume.broker.messaging.status import Refused
from reconsume.engine.retry import DeadLetterReason, RetryDecision, past_max_reconsume_times
from reconsume.engine.retry_message import send_back_request
from reconsume.errors import InvalidArgumentError, StoreError
from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig
from reconsume.message.decode import decode_record
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.store.tables import consumer_offset_key
from reconsume.wire.v2 import definition_pb2 as pb

log = logging.getLogger(__name__)

RENEW_MS = 30_000
"""How far an auto-renewed lease is extended each time (its client still connected)."""
DLQ_QUEUE_ID = 0


class PopEngine:
    """Leases of one broker's messages to its pop consumers."""

    def __init__(self, context: Callable[[], BrokerContext], alive: Callable[[str], bool]) -> None:
        self._context = context
        self._alive = alive
        """Whether a client (by id) still holds its Telemetry stream."""
        self._cursors: dict[tuple[str, str, int], QueueCursor] = {}
        self._tokens = itertools.count(1)
        self._deadlines: list[tuple[int, int, tuple[str, str, int], int]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_ms: int | None = None
        """The deadline the loop's timer is set to (None: not set)."""
        self._rotation = itertools.count()

    @property
    def context(self) -> BrokerContext:
        return self._context()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._arm()

    async def stop(self) -> None:
        self._loop = None
        self._arm()

    # ------------------------------------------------------------------ handing out
    def _cursor(self, group: str, topic: str, queue_id: int) -> QueueCursor:
        key = (group, topic, queue_id)
        cursor = self._cursors.get(key)
        if cursor is None:
            store = self.context.store
            committed = store.consumer_offsets.get(consumer_offset_key(topic, group), queue_id)
            if committed is None or committed < 0:
                # A new group starts at a young queue's first message (one never trimmed),
                # else at its end: Apache RocketMQ's initial pop offset.
                low = store.min_offset(topic, queue_id)
                committed = low if low == 0 else store.max_offset(topic, queue_id)
            cursor = self._cursors[key] = QueueCursor(committed)
        return cursor

    def queues(self, group: str, topic: str, queue_id: int) -> list[tuple[str, int]]:
        """The queues a receive reads: the one asked for, or (-1) every readable queue of the
        topic on this broker, and the group's retry queues, starting at a rotating one."""
        context = self.context
        if queue_id >= 0:
            found = [(topic, queue_id)]
        else:
            config = context.topic(topic)
            if config is None:
                raise Refused(pb.TOPIC_NOT_FOUND, f"topic {topic} is not on this broker")
            found = [(topic, i) for i in range(config.read_queue_nums)]
        retry = context.topic(retry_topic(group))
        if retry is not None:
            found.extend((retry.topic_name, i) for i in range(retry.read_queue_nums))
        if not found:
            return found
        start = next(self._rotation) % len(found)
        return found[start:] + found[:start]

    def take(
        self,
        group: SubscriptionGroupConfig,
        queues: list[tuple[str, int]],
        tags: Container[str] | None,
        batch: int,
        invisible: int,
        client_id: str = "",
        auto_renew: bool = False,
    ) -> list[Received]:
        """Lease up to ``batch`` messages of ``queues`` now (none waits)."""
        fifo = group.consume_message_orderly
        now = _now_ms()
        renew_until = now + group.consume_timeout_minute * 60_000 if auto_renew else 0
        taken: list[Received] = []
        for topic, queue_id in queues:
            if len(taken) >= batch:
                break
            cursor = self._cursor(group.group_name, topic, queue_id)
            if fifo and cursor.leases:
                continue  # a FIFO queue waits for its leased messages
            self._read(group.group_name, topic, queue_id, cursor, tags, batch - len(taken),
                       now + invisible, taken, fifo)  # fmt: skip
            if fifo and taken:
                break  # one queue's messages at a time
        if taken:
            self._rearm()
            stats = self.context.stats
            stats.popped(group.group_name, "received", len(taken))
            for received in taken:
                received.lease.client_id = client_id
                received.lease.renew_until_ms = renew_until
                stats.delivered(received.lease.topic, group.group_name, 1)
        return taken

    def _read(
        self,
        group: str,
        topic: str,
        queue_id: int,
        cursor: QueueCursor,
        tags: Container[str] | None,
        wanted: int,
        deadline_ms: int,
        taken: list[Received],
        fifo: bool,
    ) -> None:
        store = self.context.store
        result = store.get_messages(
            topic, queue_id, cursor.next_offset, max_count=wanted,
            log_limit=self.context.read_limit,
        )  # fmt: skip
        if not result.records:
            if result.next_begin_offset > cursor.next_offset:
                cursor.next_offset = result.next_begin_offset  # trimmed away: move on
                self._commit(group, topic, queue_id, cursor)
            return
        for record, offset in zip(result.records, result.queue_offsets, strict=True):
            message = decode_record(record)
            cursor.next_offset = offset + 1
            if tags is not None and message.tags not in tags:
                continue  # another tag: done for this group
            attempt = message.reconsume_times + 1
            if fifo:
                attempt += cursor.fifo_attempts.get(offset, 0)
            lease = Lease(group, topic, queue_id, offset, message.commit_log_offset,
                          next(self._tokens), deadline_ms, attempt)  # fmt: skip
            cursor.leases[offset] = lease
            heapq.heappush(
                self._deadlines, (deadline_ms, lease.token, (group, topic, queue_id), offset)
            )
            taken.append(Received(message, lease))
        self._commit(group, topic, queue_id, cursor)

    def _commit(self, group: str, topic: str, queue_id: int, cursor: QueueCursor) -> None:
        self.context.store.consumer_offsets.set(
            consumer_offset_key(topic, group), queue_id, cursor.committed()
        )

    # ------------------------------------------------------------------ the client's answers
    def _lease(self, group: str, handle: Handle) -> tuple[QueueCursor, Lease]:
        cursor = self._cursors.get((group, handle.topic, handle.queue_id))
        lease = None if cursor is None else cursor.leases.get(handle.offset)
        if cursor is None or lease is None or lease.token != handle.token:
            raise Refused(
                pb.INVALID_RECEIPT_HANDLE,
                "the receipt handle has expired: the message was handed out again or is done",
            )
        return cursor, lease

    def ack(self, group: str, handle: Handle) -> None:
        cursor, lease = self._lease(group, handle)
        del cursor.leases[lease.offset]
        cursor.fifo_attempts.pop(lease.offset, None)
        self._commit(group, lease.topic, lease.queue_id, cursor)
        self.context.stats.popped(group, "acked")

    def change_invisible(self, group: str, handle: Handle, invisible: int) -> Handle:
        """A new lease of the same message until now + ``invisible``; the old handle expires."""
        _cursor, lease = self._lease(group, handle)
        lease.renew_until_ms = 0  # the client chose when it comes back
        lease.token = next(self._tokens)
        lease.deadline_ms = _now_ms() + invisible
        heapq.heappush(
            self._deadlines,
            (lease.deadline_ms, lease.token, (group, lease.topic, lease.queue_id), lease.offset),
        )
        self._rearm()
        self.context.stats.popped(group, "invisible_changed")
        return Handle(lease.topic, lease.queue_id, lease.offset, lease.token)

    def forward_to_dead_letters(self, group: str, handle: Handle) -> None:
        """The client gives up on the message (its last attempt failed): a dead letter now."""
        cursor, lease = self._lease(group, handle)
        self._send_back(lease, RetryDecision.dead(DeadLetterReason.MAX_RECONSUME_TIMES))
        del cursor.leases[lease.offset]
        cursor.fifo_attempts.pop(lease.offset, None)
        self._commit(group, lease.topic, lease.queue_id, cursor)
        self.context.stats.popped(group, "forwarded")

    # ------------------------------------------------------------------ expiry
    def _rearm(self) -> None:
        """Set the timer again when a new deadline comes before the one it is set to."""
        if self._deadlines and (self._timer_ms is None or self._deadlines[0][0] < self._timer_ms):
            self._arm()

    def _arm(self) -> None:
        """Set the event loop's timer to the earliest deadline. Leases are taken back in the
        loop's turn where that timer falls due, by a plain callback: no task is woken and no
        event set, each of which cost the expiry a turn of a busy loop (the lateness of a
        redelivery is mostly turns of the loop)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = self._timer_ms = None
        loop = self._loop
        if loop is None or not self._deadlines:
            return
        head_ms = self._deadlines[0][0]
        delay_s = max(0.0, (head_ms * 1_000_000 - time.time_ns()) / 1e9)
        self._timer = loop.call_at(loop.time() + delay_s, self._expire_due)
        self._timer_ms = head_ms

    def _expire_due(self) -> None:
        self._timer = self._timer_ms = None
        now = _now_ms()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _due, token, key, offset = heapq.heappop(deadlines)
            cursor = self._cursors.get(key)
            lease = None if cursor is None else cursor.leases.get(offset)
            if cursor is None or lease is None or lease.token != token:
                continue
            if lease.renew_until_ms > now and self._alive(lease.client_id):
                lease.deadline_ms = min(now + RENEW_MS, lease.renew_until_ms)
                heapq.heappush(deadlines, (lease.deadline_ms, token, key, offset))
                continue
            try:
                self._expired(cursor, lease)
            except (StoreError, OSError, InvalidArgumentError) as exc:
                log.warning("taking back %s/%d@%d for %s failed, again in 1 s: %s",
                            lease.topic, lease.queue_id, offset, lease.group, exc)  # fmt: skip
                lease.deadline_ms = now + 1000
                heapq.heappush(deadlines, (lease.deadline_ms, token, key, offset))
        self._arm()

    def _expired(self, cursor: QueueCursor, lease: Lease) -> None:
        self.context.stats.popped(lease.group, "expired")
        group = self.context.store.groups.get(lease.group)
        config = group or SubscriptionGroupConfig(group_name=lease.group)
        if config.consume_message_orderly:
            attempts = cursor.fifo_attempts.get(lease.offset, 0) + 1
            if past_max_reconsume_times(lease.attempt - 1, config.retry_max_times):
                self._send_back(lease, RetryDecision.dead(DeadLetterReason.MAX_RECONSUME_TIMES))
                cursor.fifo_attempts.pop(lease.offset, None)
                cursor.leases.pop(lease.offset, None)
            else:
                # Every leased message of the queue comes back in order, from this one.
                cursor.fifo_attempts[lease.offset] = attempts
                cursor.next_offset = min(cursor.leases)
                cursor.leases.clear()
        else:
            # Due at once: the invisible duration was the delay.
            decision = RetryDecision.retry_after(0)
            if past_max_reconsume_times(lease.attempt - 1, config.retry_max_times):
                decision = RetryDecision.dead(DeadLetterReason.MAX_RECONSUME_TIMES)
            self._send_back(lease, decision)
            del cursor.leases[lease.offset]
        self._commit(lease.group, lease.topic, lease.queue_id, cursor)

    def _send_back(self, lease: Lease, decision: RetryDecision) -> None:
        """Store the lease's retry or its dead letter."""
        context = self.context
        record = context.store.read_message(lease.commit_log_offset)
        if record is None:
            log.warning("%s/%d@%d is gone from the log; not retried",
                        lease.topic, lease.queue_id, lease.offset)  # fmt: skip
            return
        original = decode_record(record)
        group = context.find_group(lease.group)
        if decision.dead_letter:
            context.ensure_topic(dead_letter_topic(lease.group), 1, PERM_READ_WRITE)
            queue_id = DLQ_QUEUE_ID
        else:
            queues = max(1, group.retry_queue_nums if group is not None else 1)
            context.ensure_topic(retry_topic(lease.group), queues, PERM_READ_WRITE)
            queue_id = lease.offset % queues
        put = send_back_request(
            original, group=lease.group, decision=decision, queue_id=queue_id,
            levels=context.delays, now_ms=_now_ms(),
        )  # fmt: skip
        context.append(put)
        stats = context.stats
        stats.sent_back(lease.group, original.properties.get("RETRY_TOPIC") or original.topic)
        if decision.dead_letter:
            stats.dead_lettered(lease.group, original.properties.get("RETRY_TOPIC") or lease.topic)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
