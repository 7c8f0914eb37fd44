"""How a group's retry topic changes shape when its ``retryQueueNums`` changes.

Apache RocketMQ rewrites ``%RETRY%<group>`` with the new queue count at once, so lowering it
strands the retries already stored (or still waiting in the schedule) for the removed queues:
no consumer reads them again. reconsume lowers in two steps (DESIGN §3, "Retry topology
changes"):

1. the **write** queue count drops at once: new retries go only to the remaining queues, and a
   retry still waiting in the schedule for a removed queue is delivered to a remaining one
   (:func:`writable_queue`);
2. the **read** queue count stays until the group has consumed every removed queue (committed
   offset at its max offset), then drops (:func:`drained_read_queue_nums`).

A retry topic whose read count exceeds its write count is therefore *draining*; nothing else
marks it, so a restarted broker resumes where it was. Raising the count adds queues at once.

Everything here is a pure function of configs and offsets; the broker calls it
(:mod:`reconsume.broker.retry_drain`).
"""

from __future__ import annotations

from collections.abc import Callable

from reconsume.message.configs import TopicConfig


def resized_retry_topic(current: TopicConfig, retry_queue_nums: int) -> TopicConfig:
    """The retry topic after its group's ``retryQueueNums`` became ``retry_queue_nums``.

    The write count follows the group; the read count never drops here (queues being drained
    stay readable) but grows with the write count. A group with ``retryQueueNums <= 0`` keeps
    its topic as it is: the broker drops its send-backs anyway, and what is stored stays
    readable.
    """
    if retry_queue_nums <= 0:
        return current
    read = max(current.read_queue_nums, retry_queue_nums)
    if (read, retry_queue_nums) == (current.read_queue_nums, current.write_queue_nums):
        return current
    return current.with_changes(read_queue_nums=read, write_queue_nums=retry_queue_nums)


def updated_retry_topic(current: TopicConfig | None, requested: TopicConfig) -> TopicConfig:
    """The retry topic an admin update (UPDATE_AND_CREATE_TOPIC) of ``%RETRY%<group>`` stores.

    Permission, write count and the rest as requested; the read count is never below the
    write count (a retry written where nobody reads is lost) nor below the current read count
    (queues being removed are drained first, then lowered by the drain check).
    """
    floor = requested.write_queue_nums if current is None else current.read_queue_nums
    read = max(requested.read_queue_nums, requested.write_queue_nums, floor)
    if read == requested.read_queue_nums:
        return requested
    return requested.with_changes(read_queue_nums=read)


def is_draining(config: TopicConfig) -> bool:
    """Whether some readable queues of this retry topic are no longer written to."""
    return config.read_queue_nums > config.write_queue_nums


def writable_queue(queue_id: int, write_queue_nums: int) -> int:
    """Where a retry meant for ``queue_id`` goes: that queue while it is writable, else one of
    the remaining ones (a retry scheduled before the count was lowered)."""
    if write_queue_nums <= 0 or 0 <= queue_id < write_queue_nums:
        return queue_id
    return queue_id % write_queue_nums


def queue_drained(committed: int | None, min_offset: int, max_offset: int) -> bool:
    """Whether the group has consumed everything a queue holds: its committed offset reached
    the max offset. Without a committed offset (or one below what retention kept) only an
    empty queue is drained."""
    consumed = min_offset if committed is None or committed < min_offset else committed
    return consumed >= max_offset


def drained_read_queue_nums(config: TopicConfig, drained: Callable[[int], bool]) -> int:
    """The read count a draining retry topic may drop to now: one past the highest removed
    queue (id >= the write count) not drained yet, or the write count when all are. Read
    queues are the ids below the read count, so a drained queue below an undrained one stays
    readable until that one is drained too."""
    write = config.write_queue_nums
    for queue_id in range(config.read_queue_nums - 1, write - 1, -1):
        if not drained(queue_id):
            return queue_id + 1
    return write
