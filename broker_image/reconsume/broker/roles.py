"""What a broker runs for its role beside the request handlers every broker has.

A **master** writes: it starts a new epoch in its store's history (the lease's, with an
election), serves its replicas (:mod:`reconsume.broker.replication`) and keeps its in-sync set
current (recorded in the lease before a write stops waiting for a member); with Sync
replication its writes wait for that set (:class:`~reconsume.broker.replicas.ReplicaSet`, also
the store's :attr:`~reconsume.store.MessageStore.replicated` gate, so the schedule and timer
services confirm deliveries only once replicated). It runs the schedule and timer services and
the retry-topic drain, and creates the template topic.

A **replica** never writes on its own: its store refuses appends, write requests are answered
``SERVICE_NOT_AVAILABLE``, its engine does not run (its progress follows the master's), and a
:class:`~reconsume.broker.follower.Follower` keeps its log and metadata the master's. It serves
pulls and offset queries, so consumers read from it while the master is away, as Apache
RocketMQ's 4.x clients read from a slave.

A broker changes role without restarting (:meth:`Role.stop` of one, :meth:`Role.start` of the
other): that is failover (:mod:`reconsume.broker.failover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial

from reconsume.broker.context import BrokerContext, nothing
from reconsume.broker.election import Elector
from reconsume.broker.follower import Follower
from reconsume.broker.replicas import ReplicaSet
from reconsume.broker.replication import ReplicationProcessor
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.engine.delays import DelayLevels
from reconsume.engine.redelivery import Earlier, delivered_origins
from reconsume.engine.schedule import ScheduleService
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.timer import TimerService
from reconsume.store.replication import Appended
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Handler
from reconsume.wire.endpoints import RemotingServer
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

REPLICA_REFUSES = (
    RequestCode.SEND_MESSAGE,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.CONSUMER_SEND_MSG_BACK,
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.ACK_QUEUE_OFFSETS,
)
"""Requests that change the log or the metadata a replica follows."""
MASTER_SERVES = (
    RequestCode.REPLICA_HANDSHAKE,
    RequestCode.REPLICATE_LOG,
    RequestCode.REPLICA_METADATA,
)
"""Requests only a master answers: its replicas'."""


class MasterRole:
    """Epoch, replicas, replication requests and the engine of a master."""

    def __init__(
        self,
        context: BrokerContext,
        settings: BrokerSettings,
        delays: DelayLevels,
        *,
        epoch: int | None = None,
        elector: Elector | None = None,
    ) -> None:
        store = context.store
        self.context = context
        self.settings = settings
        self.delays = delays
        self.elector = elector
        self._epoch = epoch
        self.replicas = ReplicaSet(
            log_end=lambda: store.commitlog.write_offset,
            sync=settings.replication is ReplicationMode.SYNC,
            lag_max_s=settings.replica_lag_max_ms / 1000,
            accept_alone=settings.replication_accept_alone,
            on_change=self._record_in_sync if elector is not None else None,
            on_visible=self._visible,
        )
        if elector is not None:
            self.replicas.recorded = frozenset()
        self.processor = ReplicationProcessor(context, self.replicas, epoch=self.epoch)
        self._tasks: list[asyncio.Task[None]] = []
        self._recording: asyncio.Task[None] | None = None
        self._server: RemotingServer | None = None
        self._schedule: ScheduleService | None = None
        self._timer: TimerService | None = None

    def epoch(self) -> int:
        current = self.context.store.epochs.current
        return 0 if current is None else current.epoch

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REPLICA_HANDSHAKE: self.processor.handshake,
            RequestCode.REPLICATE_LOG: self.processor.replicate,
            RequestCode.REPLICA_METADATA: self.processor.metadata,
        }

    async def start(self, server: RemotingServer) -> None:
        """Begin the epoch at the log's end, serve replicas, start the engine."""
        context, store = self.context, self.context.store
        epoch = self._epoch if self._epoch is not None else self.epoch() + 1
        if self.elector is not None:
            store.writable_until = self.elector.valid_until
        store.is_replica = False
        store.epochs.begin(epoch, store.commitlog.write_offset)
        log.info("master in epoch %d from offset %d", epoch, store.commitlog.write_offset)
        context.replicas = self.replicas
        context.log_grew = partial(server.dispatcher.after_read, self.processor.log_grew)
        self.processor.uncork = server.dispatcher.uncork
        self._visible(self.replicas.read_limit)
        if self.replicas.sync:
            store.replicated = self.replicas.gate
        server.on_disconnect.append(self.processor.connection_closed)
        self._server = server
        context.prepare_default_topic()
        await self._start_engine()
        context.retry_drain.start()
        self._tasks.append(asyncio.create_task(self._judge(), name="replica-set"))

    async def _start_engine(self) -> None:
        """The schedule and timer services, after one scan of the log for what both
        delivered before a crash or before this broker took over."""
        context, store = self.context, self.context.store
        settings = ScheduleSettings(persist_interval_ms=self.settings.offset_persist_interval_ms)
        schedule = ScheduleService(store, self.delays, context.append, settings)
        timer = TimerService(store, context.append, settings)
        floors = [f for f in (schedule.scan_floor(), timer.scan_floor) if f is not None]
        redelivered: dict[int, Earlier] = {}
        if floors:
            redelivered = await asyncio.to_thread(delivered_origins, store, min(floors))
        await schedule.start(redelivered)
        context.schedule = self._schedule = schedule
        await timer.start(redelivered)
        context.timer = self._timer = timer

    def _visible(self, limit: int | None) -> None:
        """Consumers now read up to ``limit``: what the replicas that may take over hold."""
        context = self.context
        if context.replicas is self.replicas:
            context.read_limit = limit
            context.waiters.visible(limit)
            self.processor.log_grew()  # held replicas learn it (their reads stop there)

    async def _judge(self) -> None:
        """Silence counts too: re-judge the in-sync set a few times per lag allowance."""
        interval = max(self.replicas.lag_max_s / 4, 0.05)
        while True:
            await asyncio.sleep(interval)
            self.replicas.tick(time.monotonic())

    def _record_in_sync(self, _wanted: frozenset[str]) -> None:
        if self._recording is None or self._recording.done():
            self._recording = asyncio.create_task(self._record(), name="record-in-sync")

    async def _record(self) -> None:
        """Bring the lease's in-sync set to the live one (repeated while it moves)."""
        elector = self.elector
        assert elector is not None
        while True:
            wanted = self.replicas.to_record()
            if wanted is None:
                return
            if not await elector.record_in_sync(wanted):
                return  # deposed: the failover loop turns this broker into a replica
            self.replicas.record(wanted)
            self.context.store.writable_until = elector.valid_until

    async def stop(self) -> None:
        context, store = self.context, self.context.store
        store.writable_until = 0.0 if self.elector is not None else None
        for task in [*self._tasks, self._recording]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tasks.clear()
        self.replicas.close()
        store.replicated = None
        context.replicas = None
        context.log_grew = nothing
        if self._server is not None:
            with contextlib.suppress(ValueError):
                self._server.on_disconnect.remove(self.processor.connection_closed)
        await context.retry_drain.stop()
        if self._schedule is not None:
            await self._schedule.stop()
            context.schedule = self._schedule = None
        if self._timer is not None:
            await self._timer.stop()
            context.timer = self._timer = None


class ReplicaRole:
    """The follower of a replica; :attr:`master` may change (a new master elected)."""

    def __init__(self, context: BrokerContext, identity: str, master: str | None) -> None:
        self.context = context
        self.master = master
        self.follower = Follower(
            context.store,
            lambda: self.master,
            replica_id=identity,
            on_appended=self._appended,
            on_read_limit=self._read_limit,
        )
        self._task: asyncio.Task[None] | None = None

    def handlers(self) -> dict[int, Handler]:
        """Writes are refused as Apache RocketMQ's slave refuses them, and so are other
        replicas' requests: clients, admins and replicas go to the master."""
        return dict.fromkeys((*REPLICA_REFUSES, *MASTER_SERVES), self._refuse)

    def _refuse(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        return request.respond(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{self.context.address}] is a replica of {self.master}: "
            "writes go to the master",
        )

    async def start(self, server: RemotingServer) -> None:
        self.context.store.is_replica = True
        # nothing is read until the master says how far its replicas hold the log: this
        # log's tail may be one the master never had
        self.context.read_limit = 0
        self._task = asyncio.create_task(self.follower.run(), name="follower")

    def _appended(self, appended: Appended) -> None:
        context = self.context
        store = context.store
        end = store.commitlog.write_offset
        for (topic, queue_id), codes in appended.items():
            context.waiters.appended(
                end,
                context.read_limit,
                topic,
                queue_id,
                store.max_offset(topic, queue_id),
                codes.copy,
            )

    def _read_limit(self, limit: int | None) -> None:
        """Reads stop where the master's do: a record past that may vanish in a failover."""
        self.context.read_limit = limit
        self.context.waiters.visible(limit)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.follower.close()


Role = MasterRole | ReplicaRole
RoleFactory = Callable[[bool, int | None, str | None], Role]
"""(master, epoch, master address) → the role to take."""
