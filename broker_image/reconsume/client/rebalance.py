"""Queue allocation among the consumers of a group (pure code).

The strategy is RocketMQ's ``AllocateMessageQueueAveragely``, computed over the same sort
orders (queues by topic, broker name, queue id; client ids as strings), so reconsume
consumers and Java or Node consumers in one group agree on who reads which queue.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconsume.client.routes import MessageQueue


def allocate_average(
    queues: Sequence[MessageQueue], consumer_ids: Sequence[str], me: str
) -> list[MessageQueue]:
    """The queues ``me`` reads: a contiguous share of the sorted queues, the first
    ``len(queues) % len(consumers)`` consumers taking one more. Empty when ``me`` is not
    (yet) among the consumers the broker knows."""
    ordered_ids = sorted(set(consumer_ids))
    if me not in ordered_ids or not queues:
        return []
    ordered = sorted(set(queues))
    index = ordered_ids.index(me)
    total, consumers = len(ordered), len(ordered_ids)
    mod = total % consumers
    if total <= consumers:
        size = 1
    elif mod > 0 and index < mod:
        size = total // consumers + 1
    else:
        size = total // consumers
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, total - start)
    return [ordered[(start + i) % total] for i in range(max(count, 0))]
