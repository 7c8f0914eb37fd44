"""Lowering the read queue count of retry topics once their removed queues are drained.

When a group's ``retryQueueNums`` (or its retry topic) is lowered, the write queue count drops
at once and the read count stays (:mod:`reconsume.engine.retry_queues`). This keeps the set of
*draining* retry topics (read count above write count) and, every ``interval_s`` and right
after each change, lowers a topic's read count as far as the group has consumed the removed
queues. A broker restarted mid-drain finds its draining topics in the topic table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from reconsume.engine.retry_queues import drained_read_queue_nums, is_draining, queue_drained
from reconsume.errors import StoreError
from reconsume.message.configs import TopicConfig
from reconsume.message.names import group_of, is_retry_topic
from reconsume.store import MessageStore
from reconsume.store.tables import consumer_offset_key

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
"""How often draining retry topics are checked; consumers commit offsets every few seconds,
so a finer check would not lower the count much sooner."""


class RetryDrain:
    def __init__(
        self,
        store: MessageStore,
        put_topic: Callable[[TopicConfig], None],
        interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        self._store = store
        self._put_topic = put_topic
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.draining: set[str] = {
            name for name, config in store.topics.items() if self._tracked(config)
        }
        """Retry topics whose read count is above their write count."""

    @staticmethod
    def _tracked(config: TopicConfig) -> bool:
        return is_retry_topic(config.topic_name) and is_draining(config)

    def track(self, config: TopicConfig) -> None:
        """A topic config was stored: follow it if it is a draining retry topic."""
        if self._tracked(config):
            self.draining.add(config.topic_name)
        else:
            self.draining.discard(config.topic_name)

    def forget(self, topic: str) -> None:
        self.draining.discard(topic)

    def check(self, topic: str) -> None:
        """Lower ``topic``'s read count as far as its group has drained the removed queues."""
        config = self._store.topics.get(topic)
        group = group_of(topic)
        if config is None or group is None or not self._tracked(config):
            self.draining.discard(topic)
            return
        store = self._store
        key = consumer_offset_key(topic, group)

        def drained(queue_id: int) -> bool:
            return queue_drained(
                store.consumer_offsets.get(key, queue_id),
                store.min_offset(topic, queue_id),
                store.max_offset(topic, queue_id),
            )

        read = drained_read_queue_nums(config, drained)
        if read < config.read_queue_nums:
            log.info(
                "retry topic %s: queues %d-%d drained by %s, read queues %d -> %d",
                topic,
                read,
                config.read_queue_nums - 1,
                group,
                config.read_queue_nums,
                read,
            )
            self._put_topic(config.with_changes(read_queue_nums=read))

    def check_all(self) -> None:
        for topic in sorted(self.draining):
            self.check(topic)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="retry-drain")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            if not self.draining:
                continue
            try:
                self.check_all()
            except (OSError, StoreError) as exc:  # a table save failing: try again later
                log.warning("checking draining retry topics failed: %s", exc)
