"""The retry and schedule engine's metrics (DESIGN §6), read when ``/metrics`` is scraped.

Send-backs, dead letters and dropped retries come from the handlers' counters; depths from
the consume queues of ``%RETRY%<group>`` and ``%DLQ%<group>`` and the groups' committed
offsets; the schedule series from the schedule service's counters and queue offsets.

* ``retry_depth{group}``: retries the group has not consumed yet, summed over the queues of
  ``%RETRY%<group>``: max offset - the group's committed offset (min offset when it has
  none). Retries still waiting for their delay are not in it (see ``schedule_pending``).
* ``dead_letter_depth{group}``: dead letters no dead-letter job has handled yet, summed over
  the queues of ``%DLQ%<group>``: max offset - the committed offset of the jobs' group
  ``%DLQ%<group>`` (min offset when it has none), less what a filtered job handled past the
  first dead letter it kept (:mod:`reconsume.store.acked`). Jobs commit and acknowledge only
  after an archive is written or the messages are re-sent, so this is the backlog still to
  deal with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from reconsume.broker.context import BrokerContext
from reconsume.message.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dead_letter_job_group,
)
from reconsume.message.offset_ranges import covered
from reconsume.store import MessageStore
from reconsume.store.tables import consumer_offset_key

PREFIX = "reconsume_"


def retry_metrics(context: BrokerContext) -> Iterable[Metric]:
    yield from _send_backs(context)
    yield from _depths(context.store)
    yield from _schedule(context)
    yield from _timer(context)


def _send_backs(context: BrokerContext) -> Iterable[Metric]:
    stats = context.stats
    send_backs = CounterMetricFamily(
        PREFIX + "send_back",
        "Messages stored by CONSUMER_SEND_MSG_BACK (retries and dead letters), per group and "
        "the topic the message was first sent to.",
        labels=["group", "origin_topic"],
    )
    for (group, origin), count in sorted(stats.send_backs.items()):
        send_backs.add_metric([group, origin], count)
    dead_letters = CounterMetricFamily(
        PREFIX + "dead_letters",
        "Messages that became dead letters (stored in %DLQ%<group>), per group and origin topic.",
        labels=["group", "origin_topic"],
    )
    for (group, origin), count in sorted(stats.dead_letters.items()):
        dead_letters.add_metric([group, origin], count)
    dropped = CounterMetricFamily(
        PREFIX + "retry_dropped",
        "Send-backs acknowledged and dropped because the group has retryQueueNums 0.",
        labels=["group"],
    )
    for group, count in sorted(stats.retries_dropped.items()):
        dropped.add_metric([group], count)
    yield from (send_backs, dead_letters, dropped)


def _depths(store: MessageStore) -> Iterable[Metric]:
    retry: dict[str, int] = {}
    dead: dict[str, int] = {}
    for topic in store.topics:
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            retry.setdefault(topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX), 0)
        elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            dead.setdefault(topic.removeprefix(DLQ_GROUP_TOPIC_PREFIX), 0)
    offsets = store.consumer_offsets
    for queue in list(store.queues):
        topic = queue.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
            committed = offsets.get(consumer_offset_key(topic, group), queue.queue_id)
            start = queue.min_offset if committed is None else max(committed, queue.min_offset)
            retry[group] = retry.get(group, 0) + max(0, queue.max_offset - start)
        elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            group = topic.removeprefix(DLQ_GROUP_TOPIC_PREFIX)
            key = consumer_offset_key(topic, dead_letter_job_group(group))
            handled = offsets.get(key, queue.queue_id)
            start = queue.min_offset if handled is None else max(handled, queue.min_offset)
            high = queue.max_offset
            done = covered(store.acked.get(key, queue.queue_id), start, high)
            dead[group] = dead.get(group, 0) + max(0, high - start - done)
    retry_depth = GaugeMetricFamily(
        PREFIX + "retry_depth",
        "Retries in %RETRY%<group> the group has not consumed (max - committed offset).",
        labels=["group"],
    )
    for group, depth in sorted(retry.items()):
        retry_depth.add_metric([group], depth)
    dead_depth = GaugeMetricFamily(
        PREFIX + "dead_letter_depth",
        "Dead letters in %DLQ%<group> no dead-letter job has handled (max offset - the "
        "committed offset of group %DLQ%<group> - what jobs acknowledged past it).",
        labels=["group"],
    )
    for group, depth in sorted(dead.items()):
        dead_depth.add_metric([group], depth)
    yield from (retry_depth, dead_depth)


def _schedule(context: BrokerContext) -> Iterable[Metric]:
    schedule = context.schedule
    if schedule is None:
        return
    stats = schedule.stats
    pending = GaugeMetricFamily(
        PREFIX + "schedule_pending",
        "Delayed messages not delivered yet, per delay level.",
        labels=["level"],
    )
    for level, count in sorted(schedule.pending().items()):
        pending.add_metric([str(level)], count)
    delivered = CounterMetricFamily(
        PREFIX + "schedule_delivered",
        "Delayed messages delivered to their real topic, per delay level.",
        labels=["level"],
    )
    for level, count in sorted(stats.delivered.items()):
        delivered.add_metric([str(level)], count)
    lateness = HistogramMetricFamily(
        PREFIX + "schedule_lateness_seconds",
        "Seconds from a delayed message's due time to its delivery.",
    )
    lateness.add_metric(
        [],
        [(_le(bound), count) for bound, count in stats.lateness.cumulative()],
        stats.lateness.sum,
    )
    yield from (pending, delivered, lateness)
    # Shared by delay levels and the timer wheel: one machinery, one health signal.
    both = [stats] if context.timer is None else [stats, context.timer.stats]
    yield CounterMetricFamily(
        PREFIX + "schedule_redelivered_duplicates",
        "Delayed messages (delay levels and timer) delivered again after a restart or failover "
        "although the log held their earlier delivery; 0 while those are skipped.",
        value=sum(s.redelivered_duplicates for s in both),
    )
    yield CounterMetricFamily(
        PREFIX + "schedule_skipped_redeliveries",
        "Delayed entries (delay levels and timer) found delivered before a restart or failover "
        "and not delivered again: the copy already in the log is what consumers get.",
        value=sum(s.already_delivered for s in both),
    )
    yield CounterMetricFamily(
        PREFIX + "schedule_put_failures",
        "Deliveries of delayed messages (delay levels and timer) the store refused; each is "
        "retried at the same entry (nothing is skipped).",
        value=sum(s.put_failures for s in both),
    )
    yield CounterMetricFamily(
        PREFIX + "schedule_discarded",
        "Delayed entries (delay levels and timer) that could not be delivered at all (record "
        "gone, no valid real topic) and were skipped.",
        value=sum(s.discarded for s in both),
    )


def _timer(context: BrokerContext) -> Iterable[Metric]:
    timer = context.timer
    if timer is None:
        return
    stats = timer.stats
    yield GaugeMetricFamily(
        PREFIX + "timer_pending",
        "Timer messages (TIMER_* properties, policy retries) not delivered yet.",
        value=timer.pending(),
    )
    yield CounterMetricFamily(
        PREFIX + "timer_delivered",
        "Timer messages delivered to their real topic.",
        value=sum(stats.delivered.values()),
    )
    lateness = HistogramMetricFamily(
        PREFIX + "timer_lateness_seconds",
        "Seconds from a timer message's due time to its delivery.",
    )
    lateness.add_metric(
        [],
        [(_le(bound), count) for bound, count in stats.lateness.cumulative()],
        stats.lateness.sum,
    )
    yield lateness


def _le(bound: float) -> str:
    """A bucket's ``le`` label as Prometheus writes it."""
    return "+Inf" if math.isinf(bound) else str(bound)
