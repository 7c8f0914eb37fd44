"""State every request handler of a broker shares, and the topic and group rules they apply.

The topic rules are RocketMQ's ``TopicConfigManager``: a send to an unknown topic creates it
from a template topic (``createTopicInSendMessageMethod``), and the broker creates retry and
dead-letter topics itself (``createTopicInSendMessageBackMethod``). Unknown consumer groups get
a default config on first use when ``auto_create_subscription_group`` is on
(``SubscriptionGroupManager.findSubscriptionGroupConfig``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from typing import Any

from reconsume.broker.consumers import ConsumerRegistry
from reconsume.broker.flush_answers import FlushAnswers, PreparedReply
from reconsume.broker.locks import LockTable
from reconsume.broker.longpoll import PullWaiters
from reconsume.broker.replica_answers import ReplicaAnswers
from reconsume.broker.replicas import ReplicaSet
from reconsume.broker.retry_drain import RetryDrain
from reconsume.broker.settings import BrokerSettings
from reconsume.broker.stats import BrokerStats
from reconsume.engine.delays import DelayLevels
from reconsume.engine.retry import DeadLetterReason
from reconsume.engine.retry_message import mark_dead_letter, origin_message_id, origin_topic
from reconsume.engine.retry_queues import resized_retry_topic, updated_retry_topic, writable_queue
from reconsume.engine.schedule import ScheduleService
from reconsume.engine.timer import TimerService
from reconsume.message.address import HostAddress
from reconsume.message.configs import (
    PERM_INHERIT,
    PERM_READ_WRITE,
    SubscriptionGroupConfig,
    TopicConfig,
)
from reconsume.message.names import (
    DEFAULT_TOPIC,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    group_of,
    is_retry_topic,
    retry_topic,
)
from reconsume.store import FlushMode, MessageStore, PutRequest, PutResult
from reconsume.store.requests import TagsCode, default_tags_code
from reconsume.wire.codes import ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)


def nothing() -> None:
    """The default of hooks nobody set."""


class BrokerContext:
    """The store, the client registry, held pulls and queue locks of one broker."""

    def __init__(
        self,
        settings: BrokerSettings,
        store: MessageStore,
        store_host: HostAddress,
        on_topics_changed: Callable[[], None],
        tags_code: TagsCode = default_tags_code,
        delays: DelayLevels | None = None,
        topics_registered: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.store_host = store_host
        self.address = str(store_host)
        self.tags_code = tags_code
        """The store's tag-code hook: long polling matches new messages with it."""
        self.delays = delays or DelayLevels.parse(settings.delay_levels)
        """The delay levels (``--delay-levels``)."""
        self.schedule: ScheduleService | None = None
        """Delivers delayed messages when due; set once started."""
        self.timer: TimerService | None = None
        """Delivers timer messages (and policy retries) when due; set once started."""
        self.consumers = ConsumerRegistry(self._notify_enabled)
        self.waiters = PullWaiters()
        self.locks = LockTable()
        self.stats = BrokerStats()
        self._on_topics_changed = on_topics_changed
        self._topics_registered = topics_registered
        self._version_stamps: dict[str, tuple[int, int]] = {}
        self.retry_drain = RetryDrain(store, self.put_topic)
        """Lowers the read queues of retry topics once the removed ones are drained; the
        server starts and stops its periodic check."""
        self.replicas: ReplicaSet | None = None
        """A master's replicas (set when it serves them)."""
        self.read_limit: int | None = None
        """The commit-log offset consumers read no further than (what the replicas that may
        take over hold); None: the whole log is read."""
        self.log_grew: Callable[[], None] = nothing
        """Told after every append (a master's held replication requests answer at once)."""
        self.flush_answers = FlushAnswers(store.durable)
        """Writes waiting for their fsync under Sync flush (the server makes its releases
        batch their answers as a read does: :meth:`Dispatcher.as_read`)."""
        self.replica_answers = ReplicaAnswers()
        """Writes waiting for their replicas under Sync replication (likewise)."""

    # ------------------------------------------------------------------ topics
    def topic(self, name: str) -> TopicConfig | None:
        return self.store.topics.get(name)

    def put_topic(self, config: TopicConfig) -> None:
        """Create or replace a topic config; name servers hear of it at once."""
        self.store.topics.put(config.topic_name, config)
        log.info("topic %s: %s", config.topic_name, config.to_dict())
        self.retry_drain.track(config)
        self._on_topics_changed()

    def update_topic(self, requested: TopicConfig) -> TopicConfig:
        """An admin's create or update (UPDATE_AND_CREATE_TOPIC). A retry topic keeps the
        queues being removed readable until its group has drained them (DESIGN §3, "Retry
        topology changes"); returns what was stored."""
        config = requested
        if is_retry_topic(requested.topic_name):
            config = updated_retry_topic(self.topic(requested.topic_name), requested)
        self.put_topic(config)
        self.retry_drain.check(config.topic_name)
        return config

    async def topics_registered(self) -> None:
        """Wait until the name servers have been sent the topic table as it is now."""
        if self._topics_registered is not None:
            await self._topics_registered()

    def group_updated(self, group: SubscriptionGroupConfig) -> None:
        """A group's config was stored: its retry topic follows ``retryQueueNums`` (more
        queues at once; fewer written at once, read until drained)."""
        topic = retry_topic(group.group_name)
        current = self.topic(topic)
        if current is None:
            return  # created with the group's queues on first use
        resized = resized_retry_topic(current, group.retry_queue_nums)
        if resized != current:
            self.put_topic(resized)
            self.retry_drain.check(topic)

    def delete_topic(self, name: str) -> bool:
        deleted = self.store.topics.delete(name)
        self.retry_drain.forget(name)
        if deleted:
            self._on_topics_changed()
        return deleted

    def create_topic_for_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: the topic if it exists, else a new one made from
        ``default_topic``'s config when that has the inherit permission; None when refused."""
        existing = self.topic(topic)
        if existing is not None:
            return existing
        template = self.topic(default_topic)
        if template is None:
            log.warning("not creating topic %s: template topic %s absent", topic, default_topic)
            return None
        perm = template.perm
        if default_topic == DEFAULT_TOPIC and not self.settings.auto_create_topic:
            perm = PERM_READ_WRITE
        if not perm & PERM_INHERIT:
            log.warning(
                "not creating topic %s: template %s does not allow it", topic, default_topic
            )
            return None
        queue_nums = max(0, min(client_queue_nums, template.write_queue_nums))
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=perm & ~PERM_INHERIT,
            topic_filter_type=template.topic_filter_type,
            topic_sys_flag=topic_sys_flag,
        )
        self.put_topic(config)
        return config

    def ensure_topic(
        self, topic: str, queue_nums: int, perm: int = PERM_READ_WRITE, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: the topic as it is, or created with these
        queues and permission (retry and dead-letter topics)."""
        existing = self.topic(topic)
        if existing is not None:
            return existing
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=perm,
            topic_sys_flag=topic_sys_flag,
        )
        self.put_topic(config)
        return config

    def prepare_default_topic(self) -> None:
        """With auto-creation on, serve the template topic TBW102 (RocketMQ creates it so
        producers find a broker for topics that do not exist yet); with it off, do not."""
        current = self.topic(DEFAULT_TOPIC)
        if self.settings.auto_create_topic:
            queues = self.settings.default_topic_queue_nums
            wanted = TopicConfig(
                topic_name=DEFAULT_TOPIC,
                read_queue_nums=queues,
                write_queue_nums=queues,
                perm=PERM_READ_WRITE | PERM_INHERIT,
            )
            if current != wanted:
                self.store.topics.put(DEFAULT_TOPIC, wanted)
        elif current is not None:
            self.store.topics.delete(DEFAULT_TOPIC)

    def topic_data_version(self) -> dict[str, Any]:
        """RocketMQ's ``DataVersion`` of the topic table: the change counter and when the
        broker saw it change."""
        return self._data_version("topics", self.store.topics.version)

    def group_data_version(self) -> dict[str, Any]:
        return self._data_version("groups", self.store.groups.version)

    def _data_version(self, table: str, counter: int) -> dict[str, Any]:
        seen = self._version_stamps.get(table)
        if seen is None or seen[0] != counter:
            seen = (counter, int(time.time() * 1000))
            self._version_stamps[table] = seen
        return {"counter": counter, "timestamp": seen[1]}

    # ------------------------------------------------------------------ groups
    def find_group(self, name: str) -> SubscriptionGroupConfig | None:
        """The group's config; created with defaults when unknown and auto-creation is on."""
        config = self.store.groups.get(name)
        if config is None and self.settings.auto_create_subscription_group:
            config = SubscriptionGroupConfig(group_name=name)
            self.store.groups.put(name, config)
            log.info("subscription group %s created with defaults", name)
        return config

    # ------------------------------------------------------------------ writes
    @property
    def writable(self) -> bool:
        """Whether the broker takes messages: reconsume has no broker-permission setting, so
        only a store turned read-only (a failed flush) makes it unwritable."""
        return self.store.durability.failure is None

    def append(self, request: PutRequest) -> PutResult:
        """Append a message the broker makes itself (a send-back, a due delayed message) and
        wake what waits for it; raises what :meth:`MessageStore.append` raises.

        A retry for a queue of ``%RETRY%<group>`` that is no longer written to (scheduled
        before ``retryQueueNums`` was lowered) goes to one of the remaining queues: the removed
        ones may stop being read once drained."""
        if is_retry_topic(request.topic):
            config = self.topic(request.topic)
            if config is not None:
                queue_id = writable_queue(request.queue_id, config.write_queue_nums)
                if queue_id != request.queue_id:
                    request = replace(request, queue_id=queue_id)
        result = self.store.append(request)
        self.log_grew()
        topic, queue_id = request.topic, request.queue_id
        if topic == SCHEDULE_TOPIC:
            self.schedule_appended(queue_id)
        elif topic == TIMER_TOPIC:
            self.timer_appended()
        else:
            self.waiters.appended(
                result.end_offset,
                self.read_limit,
                topic,
                queue_id,
                result.queue_offset + 1,
                lambda: (self.tags_code(topic, request.properties, 0),),
            )
        return result

    @property
    def waits_for_storage(self) -> bool:
        """Whether a write is answered only once it counts as stored
        (:meth:`answer_when_stored`)."""
        replicas = self.replicas
        return self.store.settings.flush_mode is FlushMode.SYNC or (
            replicas is not None and replicas.sync
        )

    def answer_when_stored(self, result: PutResult, answer: Callable[[int], None]) -> None:
        """Call ``answer`` with SUCCESS once ``result`` counts as stored — its fsync under Sync
        flush, then every in-sync replica's acknowledgement under Sync replication — or with
        FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT after ``sync_flush_timeout_ms`` (the message
        stays stored), SLAVE_NOT_AVAILABLE with no replica in sync, SERVICE_NOT_AVAILABLE when
        the fsync failed — from the code that releases it: no task per write, and the answers
        one release makes leave in one write per connection. For a broker that
        :attr:`waits_for_storage`."""
        timeout_s = self.settings.sync_flush_timeout_ms / 1000
        if self.store.settings.flush_mode is not FlushMode.SYNC:
            self._when_replicated(result.end_offset, timeout_s, answer)
            return

        def flushed(code: int) -> None:
            if code == ResponseCode.SUCCESS:
                self._when_replicated(result.end_offset, timeout_s, answer)
            else:
                answer(code)

        self.flush_answers.wait(result.end_offset, timeout_s, flushed)

    def reply_when_stored(
        self,
        result: PutResult,
        connection: Connection,
        request: RemotingCommand,
        build: Callable[[int], RemotingCommand],
        *,
        told: Callable[[int], None] | None = None,
    ) -> None:
        """:meth:`answer_when_stored` for a request answered by ``build(code)``, which must
        only build (what counts the outcome goes in ``told``, called with the code first): its
        SUCCESS answer is built and encoded right after the write starts waiting — once its
        fsync is asked for and its replica answered — while nothing else is to be done, so
        what releases it only writes it."""
        reply = PreparedReply(connection, request, build, told)
        self.answer_when_stored(result, reply)
        reply.prepare()

    def _when_replicated(
        self, end_offset: int, timeout_s: float, answer: Callable[[int], None]
    ) -> None:
        replicas = self.replicas
        if replicas is None or not replicas.sync:
            answer(ResponseCode.SUCCESS)
        else:
            self.replica_answers.wait(replicas, end_offset, timeout_s, answer)

    def schedule_appended(self, queue_id: int) -> None:
        """A delayed message was stored in schedule queue ``queue_id``."""
        if self.schedule is not None:
            self.schedule.wake(queue_id)

    def timer_appended(self) -> None:
        """A message was stored in the timer topic."""
        if self.timer is not None:
            self.timer.wake()

    def dead_letter_sent(self, properties: MutableMapping[str, str], sent_topic: str) -> None:
        """A send to ``%RETRY%<group>`` past the group's maximum reconsume times becomes a dead
        letter: mark it as a send-back's dead letter is marked, and count it."""
        origin = origin_topic(properties, sent_topic)
        mark_dead_letter(
            properties,
            origin_topic=origin,
            origin_message_id=origin_message_id(properties, ""),
            reason=DeadLetterReason.MAX_RECONSUME_TIMES,
            now_ms=time.time_ns() // 1_000_000,
        )
        self.stats.dead_lettered(group_of(sent_topic) or sent_topic, origin)

    def _notify_enabled(self, group: str) -> bool:
        config = self.store.groups.get(group)
        return config is None or config.notify_consumer_ids_changed_enable
