"""The push consumer: pulls with long polling and hands messages to a listener.

asyncio first::

    settings = ConsumerSettings(batch_size=16)    # optional: every setting has a default
    consumer = PushConsumer(["127.0.0.1:9876"], "orders-consumer", settings=settings)
    consumer.subscribe("orders", "paid || refunded")
    consumer.register_listener(handle)            # or register_orderly_listener
    await consumer.start()
    ...
    await consumer.shutdown()

Clustering consumers of a group split the topic's queues among themselves (the allocation of
:mod:`reconsume.client.rebalance`), re-split whenever a broker tells them the group changed
(NOTIFY_CONSUMER_IDS_CHANGED) and at least every 20 s, and commit offsets to the brokers.
Broadcasting consumers each read every queue and keep offsets in a local file. Shutdown stops
pulling, lets batches in the listener finish, commits offsets and leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reconsume.client.assignment import Assignment, QueueSettings
from reconsume.client.broker_api import BrokerApi
from reconsume.client.concurrent import ConcurrentService
from reconsume.client.identity import client_id
from reconsume.client.listener import (
    ConcurrentListener,
    MessageModel,
    OrderlyListener,
    restore_retry_topic,
)
from reconsume.client.locks import QueueLocks
from reconsume.client.namesrv import RouteCache
from reconsume.client.offsets import BrokerOffsetStore, LocalOffsetStore, OffsetStore
from reconsume.client.orderly import OrderlyService
from reconsume.client.producer import Producer
from reconsume.client.rebalance import allocate_average
from reconsume.client.routes import MessageQueue, TopicRoute
from reconsume.client.sendback import SendBack
from reconsume.client.settings import DEFAULT_SETTINGS, ConsumerSettings
from reconsume.client.stats import ConsumerStats
from reconsume.client.subscription import Subscription, heartbeat_body
from reconsume.errors import InvalidArgumentError, ReconsumeError, RemotingError
from reconsume.message.model import StoredMessage
from reconsume.message.names import retry_topic, validate_group, validate_topic
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.signing import Signing, signer_or_environment
from reconsume.wire.tls import tls_or_environment
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


class PushConsumer:
    """A consumer of ``group``, found through ``name_servers``; how it consumes is
    ``settings`` (see :mod:`reconsume.client.settings`)."""

    def __init__(
        self,
        name_servers: list[str],
        group: str,
        *,
        settings: ConsumerSettings = DEFAULT_SETTINGS,
        credentials: Signing | None = None,
        tls: bool | ssl.SSLContext | None = None,
    ) -> None:
        """A consumer of ``group`` that finds brokers through ``name_servers``.
        ``credentials`` (``Credentials``, or ``CredentialFiles`` of a mounted Secret) sign every
        request (servers with access control on refuse unsigned ones); None: those of the
        environment (``RECONSUME_CREDENTIALS_DIR``, else ``RECONSUME_ACCESS_KEY`` and
        ``RECONSUME_SECRET_KEY``) when set, else unsigned.
                ``tls``: True (TLS, trusting ``RECONSUME_TLS_CA_FILE``, else the system's CAs), an
        ``ssl.SSLContext``, False (plaintext); None: as ``RECONSUME_TLS`` says.
        """
        validate_group(group)
        self.group = group
        self.settings = settings
        self._credentials: Signing | None = credentials
        self._tls = tls_or_environment(tls)
        self.instance_name = settings.instance_name or f"{os.getpid()}-{id(self):x}"
        self.client_id = client_id(self.instance_name)
        self._name_servers = list(name_servers)
        self.stats = ConsumerStats()
        """What this consumer did with its messages (see :class:`ConsumerStats`)."""
        self._subscriptions: dict[str, Subscription] = {}
        self._concurrent_listener: ConcurrentListener | None = None
        self._orderly_listener: OrderlyListener | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._started = False
        self._stopping = False
        self._rebalance_lock = asyncio.Lock()
        self._incomplete = False
        """The last rebalance could not place every queue: try again within a second."""

    # ------------------------------------------------------------------ configuration
    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Receive ``topic``'s messages whose tag matches ``expression`` (``*``, or
        ``tagA || tagB``)."""
        validate_topic(topic)
        self._subscriptions[topic] = Subscription.parse(topic, expression)

    def register_listener(self, listener: ConcurrentListener) -> None:
        self._concurrent_listener = listener
        self._orderly_listener = None

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        self._orderly_listener = listener
        self._concurrent_listener = None

    @property
    def orderly(self) -> bool:
        return self._orderly_listener is not None

    @property
    def assigned(self) -> frozenset[MessageQueue]:
        """The queues this consumer reads now."""
        if not self._started:
            return frozenset()
        return frozenset(q for q, pq in self._assignment.queues.items() if pq.is_active())

    @property
    def consumed(self) -> int:
        return self.stats.consumed

    @property
    def failures_dropped(self) -> int:
        """Broadcasting messages whose consumption failed (dropped, as RocketMQ does)."""
        return self.stats.dropped

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        if self._started:
            raise ReconsumeError(f"consumer {self.client_id} was already started")
        if not self._subscriptions:
            raise InvalidArgumentError("subscribe to at least one topic before start()")
        if self._concurrent_listener is None and self._orderly_listener is None:
            raise InvalidArgumentError("register a listener before start()")
        self._started = True
        settings = self.settings
        clustering = settings.model is MessageModel.CLUSTERING
        if clustering and retry_topic(self.group) not in self._subscriptions:
            self._subscriptions[retry_topic(self.group)] = Subscription.parse(
                retry_topic(self.group)
            )
        dispatcher = Dispatcher(f"consumer {self.client_id}")
        dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._notified)
        self._client = RemotingClient(
            dispatcher, signer=signer_or_environment(self._credentials), tls=self._tls
        )
        self._api = BrokerApi(self._client, settings.timeout_s)
        self._routes = RouteCache(self._client, self._name_servers, timeout_s=settings.timeout_s)
        self._locks = QueueLocks(self._api, self.group, self.client_id, self._broker_of)
        self._offsets: OffsetStore
        if clustering:
            self._offsets = BrokerOffsetStore(
                self._client, self._routes, self.group, timeout_s=settings.timeout_s
            )
        else:
            directory = settings.offset_dir or (
                Path.home() / ".reconsume" / "offsets" / self.instance_name
            )
            self._offsets = LocalOffsetStore(directory / self.group)
        await self._offsets.load()
        self._executor = ThreadPoolExecutor(settings.concurrency, f"consume-{self.group}")
        self._producer = Producer(self._name_servers, INNER_PRODUCER_GROUP)
        max_times = settings.reconsume_limit(self.orderly)
        send_back = SendBack(
            self._client,
            self._routes,
            self._producer,
            self.group,
            max_reconsume_times=max_times,
            timeout_s=settings.timeout_s,
            stats=self.stats,
        )
        self._service: ConcurrentService | OrderlyService
        if self._orderly_listener is not None:
            self._service = OrderlyService(
                self._orderly_listener,
                model=settings.model,
                offsets=self._offsets,
                dead_letter=send_back.dead_letter,
                lock=self._locks.lock,
                restore=self._restore,
                batch_size=settings.batch_size,
                max_reconsume_times=max_times,
                suspend_ms=settings.suspend_ms,
                executor=self._executor,
                stats=self.stats,
            )
        else:
            assert self._concurrent_listener is not None
            self._service = ConcurrentService(
                self._concurrent_listener,
                model=settings.model,
                offsets=self._offsets,
                send_back=send_back,
                restore=self._restore,
                batch_size=settings.batch_size,
                concurrency=settings.concurrency,
                executor=self._executor,
                local_retry_delay_s=settings.local_retry_delay_s,
                stats=self.stats,
            )
        await self._heartbeat()
        self._assignment = Assignment(
            QueueSettings(self.group, self.client_id, self.orderly, settings),
            client=self._client,
            api=self._api,
            offsets=self._offsets,
            locks=self._locks,
            broker_of=self._broker_of,
            submit=self._service.submit,
            subscriptions=self._subscriptions,
        )
        await self._rebalance()
        self._every(settings.heartbeat_interval_s, self._heartbeat)
        self._every(settings.persist_interval_s, self._persist)
        if self.orderly and clustering:
            self._every(settings.lock_interval_s, self._lock_all_queues)
        self._tasks.append(asyncio.ensure_future(self._rebalance_loop()))
        log.info("consumer %s of %s started", self.client_id, self.group)

    async def shutdown(self) -> None:
        """Stop pulling, let running batches finish (up to ``shutdown_wait_s``), commit
        offsets, unlock orderly queues and leave the group."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        queues = await self._assignment.stop()
        self._service.cancel()
        await self._offsets.persist(queues)
        if self.orderly and self.settings.model is MessageModel.CLUSTERING:
            await self._locks.unlock(queues)
        for address in await self._brokers():
            try:
                await self._api.unregister(address, self.client_id, consumer_group=self.group)
            except RemotingError as exc:
                log.warning("leaving group %s on %s failed: %s", self.group, address, exc)
        self._assignment.queues.clear()
        await self._producer.close()
        await self._client.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        log.info("consumer %s of %s stopped", self.client_id, self.group)

    def _every(self, interval_s: float, action: Callable[[], Awaitable[None]]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    await action()
                except ReconsumeError as exc:  # remoting and malformed answers alike
                    log.warning("%s failed: %s", action.__name__, exc)

        self._tasks.append(asyncio.ensure_future(loop()))

    # ------------------------------------------------------------------ brokers
    def _notified(self, request: RemotingCommand, connection: Connection) -> None:
        if request.ext_fields.get("consumerGroup") == self.group:
            self._rebalance_now.set()

    async def _route(self, topic: str) -> TopicRoute | None:
        """``topic``'s route, read again when it names a broker address that could not be
        reached (after a failover the cached one can list a dead master for 30 s)."""
        route = await self._routes.get(topic)
        if route is not None and not self._client.unreachable.isdisjoint(
            address for broker in route.brokers.values() for address in broker.addresses.values()
        ):
            route = await self._routes.get(topic, refresh=True)
        return route

    async def _brokers(self) -> set[str]:
        addresses: set[str] = set()
        for topic in self._subscriptions:
            try:
                route = await self._route(topic)
            except RemotingError:
                continue
            if route is not None:  # replicas too: they answer for the group while a master is away
                addresses.update(a for b in route.brokers.values() for a in b.addresses.values())
        return addresses

    async def _heartbeat(self) -> None:
        body = heartbeat_body(
            self.client_id,
            INNER_PRODUCER_GROUP,
            self.group,
            self.settings.model.value,
            self.settings.consume_from.value,
            self._subscriptions.values(),
        )
        for address in await self._brokers():
            try:
                await self._api.heartbeat(address, body)
            except RemotingError as exc:
                log.warning("heartbeat to %s failed: %s", address, exc)

    async def _broker_of(self, queue: MessageQueue) -> str:
        route = await self._routes.get(queue.topic)
        address = route.reader_of(queue.broker_name) if route is not None else None
        if address is None or address in self._client.unreachable:
            # a broker that cannot be reached may have left the route (a master gone: its
            # replica serves the queue)
            route = await self._routes.get(queue.topic, refresh=True)
            address = route.reader_of(queue.broker_name) if route is not None else None
        if address is None:
            raise RemotingError(f"no address for broker {queue.broker_name}")
        return address

    # ------------------------------------------------------------------ rebalance
    async def _rebalance_loop(self) -> None:
        while not self._stopping:
            incomplete = False
            delay_s = 1.0 if self._incomplete else self.settings.rebalance_interval_s
            # asyncio.timeout, not wait_for: a wait_for over an Event can swallow the
            # cancellation shutdown sends (CPython 3.11), leaving this loop running.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_s):
                    await self._rebalance_now.wait()
            self._rebalance_now.clear()
            try:
                await self._rebalance()
            except ReconsumeError as exc:
                log.warning("rebalance of %s failed: %s", self.group, exc)
                incomplete = True
            self._incomplete = self._incomplete or incomplete

    async def _rebalance(self) -> None:
        """Bring the set of queues read in line with the allocation."""
        async with self._rebalance_lock:
            if self._stopping:
                return
            incomplete = False
            for topic, _subscription in list(self._subscriptions.items()):
                route = await self._route(topic)
                if route is None or not route.read_queues:
                    incomplete = True  # e.g. the retry topic, until the broker registers it
                    continue
                queues = route.read_queues
                if self.settings.model is MessageModel.BROADCASTING:
                    mine = set(queues)
                else:
                    readers = sorted({b.reader for b in route.brokers.values() if b.reader})
                    ids: list[str] = []
                    for address in readers:
                        try:
                            ids = await self._api.consumer_ids(address, self.group)
                        except RemotingError:
                            continue
                        if ids:
                            break
                    if self.client_id not in ids:
                        # No reader answered, or the one that did has not heard from this
                        # consumer (a master elected since the last heartbeat): keep the
                        # queues read now (RocketMQ keeps them when the lookup fails), tell
                        # the brokers, and ask again in a second. Allocating over a list
                        # without this consumer would drop every queue until the next
                        # heartbeat, up to 30 s later.
                        incomplete = True
                        await self._heartbeat()
                        continue
                    mine = set(allocate_average(queues, ids, self.client_id))
                incomplete |= not await self._assignment.update(topic, mine)
            self._incomplete = incomplete

    async def _persist(self) -> None:
        await self._offsets.persist(list(self._assignment.queues))

    async def _lock_all_queues(self) -> None:
        await self._locks.renew(dict(self._assignment.queues))

    def _restore(self, message: StoredMessage) -> StoredMessage:
        return restore_retry_topic(message, self.group)
