"""A synchronous facade for scripts: the asyncio clients run on a background event loop.

::

    with SyncProducer(["127.0.0.1:9876"]) as producer:
        producer.send(Message("orders", b"..."))

    consumer = SyncPushConsumer(["127.0.0.1:9876"], "orders-consumer")
    consumer.subscribe("orders")
    consumer.register_listener(lambda messages, context: ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    ...
    consumer.shutdown()

Plain-function listeners run on the consumer's thread pool, as they do with the asyncio API.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from reconsume.client.admin import AdminClient, BrokerInfo, QueueProgress
from reconsume.client.listener import ConcurrentListener, OrderlyListener
from reconsume.client.producer import Producer, SendResult
from reconsume.client.push import PushConsumer
from reconsume.client.routes import MessageQueue
from reconsume.client.settings import DEFAULT_SETTINGS, ConsumerSettings
from reconsume.client.stats import ConsumerStats
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.message.model import Message

T = TypeVar("T")


class _Loop:
    """An event loop on a daemon thread, started on first use and shared by the facades."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="reconsume-client", daemon=True
                ).start()
                cls._loop = loop
            return cls._loop


def run(coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    """Run ``coroutine`` on the facade's loop and wait for its result."""
    future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, _Loop.get())
    return future.result(timeout_s)


async def _build(factory: Any, *args: Any, **kwargs: Any) -> Any:
    # asyncio objects (events, locks) must be created on the loop that uses them.
    return factory(*args, **kwargs)


class SyncProducer:
    def __init__(
        self, name_servers: Sequence[str], group: str = "DEFAULT_PRODUCER", **options: Any
    ):
        self._producer: Producer = run(_build(Producer, name_servers, group, **options))

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, message: Message, *, queue: MessageQueue | None = None) -> SendResult:
        return run(self._producer.send(message, queue=queue))

    def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> SendResult:
        return run(self._producer.send_batch(messages, queue=queue))

    def close(self) -> None:
        run(self._producer.close())


class SyncPushConsumer:
    def __init__(
        self,
        name_servers: Sequence[str],
        group: str,
        *,
        settings: ConsumerSettings = DEFAULT_SETTINGS,
    ) -> None:
        self._consumer: PushConsumer = run(
            _build(PushConsumer, list(name_servers), group, settings=settings)
        )

    @property
    def consumer(self) -> PushConsumer:
        return self._consumer

    @property
    def stats(self) -> ConsumerStats:
        """The consumer's counters (read from any thread; they only grow)."""
        return self._consumer.stats

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._consumer.subscribe(topic, expression)

    def register_listener(self, listener: ConcurrentListener) -> None:
        self._consumer.register_listener(listener)

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        self._consumer.register_orderly_listener(listener)

    def start(self) -> None:
        run(self._consumer.start())

    def shutdown(self) -> None:
        run(self._consumer.shutdown())

    def __enter__(self) -> SyncPushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class SyncAdminClient:
    def __init__(self, name_servers: Sequence[str], **options: Any) -> None:
        self._admin: AdminClient = run(_build(AdminClient, name_servers, **options))

    def __enter__(self) -> SyncAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        run(self._admin.close())

    def create_topic(self, topic: str, **options: Any) -> list[str]:
        return run(self._admin.create_topic(topic, **options))

    def update_topic(self, config: TopicConfig, **options: Any) -> list[str]:
        return run(self._admin.update_topic(config, **options))

    def delete_topic(self, topic: str, **options: Any) -> None:
        run(self._admin.delete_topic(topic, **options))

    def delete_topic_route(self, topic: str, *, cluster: str | None = None) -> None:
        run(self._admin.delete_topic_route(topic, cluster=cluster))

    def brokers(self, cluster: str | None = None) -> list[BrokerInfo]:
        return run(self._admin.brokers(cluster))

    def topic_configs(self, broker: str) -> dict[str, TopicConfig]:
        return run(self._admin.topic_configs(broker))

    def group_configs(self, broker: str) -> dict[str, SubscriptionGroupConfig]:
        return run(self._admin.group_configs(broker))

    def broker_depth(
        self, broker: str, topic: str, queues: int, *, group: str | None = None
    ) -> int:
        return run(self._admin.broker_depth(broker, topic, queues, group=group))

    def topics(self) -> list[str]:
        return run(self._admin.topics())

    def create_group(self, config: SubscriptionGroupConfig, **options: Any) -> list[str]:
        return run(self._admin.create_group(config, **options))

    def delete_group(self, group: str, **options: Any) -> None:
        run(self._admin.delete_group(group, **options))

    def consumer_ids(self, group: str) -> list[str]:
        return run(self._admin.consumer_ids(group))

    def consumer_offset(self, group: str, queue: MessageQueue) -> int:
        return run(self._admin.consumer_offset(group, queue))

    def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        return run(self._admin.consumer_progress(group, topic))

    def topic_depth(self, topic: str) -> int:
        return run(self._admin.topic_depth(topic))
