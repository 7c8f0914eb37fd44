"""What a broker runs for its role beside the request handlers every broker has.

A **master** (``broker_id`` 0) writes: it starts a new epoch in its store's history, serves
its replicas (:mod:`reconsume.broker.replication`) and keeps its in-sync set current; with
Sync replication its writes wait for that set (:class:`~reconsume.broker.replicas.ReplicaSet`,
also the store's :attr:`~reconsume.store.MessageStore.replicated` gate, so the schedule and
timer services confirm deliveries only once replicated). Its schedule and timer services run.

A **replica** (``broker_id`` 1 or more, ``master_address`` set) never writes on its own: its
store refuses appends, its schedule and timer services do not run (their progress follows the
master's), and a :class:`~reconsume.broker.follower.Follower` keeps its log and metadata the
master's. It serves pulls and offset queries, so consumers read from it while the master is
away, as Apache RocketMQ's 4.x clients read from a slave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from reconsume.broker.context import BrokerContext
from reconsume.broker.follower import Follower
from reconsume.broker.replicas import ReplicaSet
from reconsume.broker.replication import ReplicationProcessor
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.store.replication import Appended
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection, Handler, RemotingServer

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
)
"""Requests that change the log or the metadata a replica follows."""


class MasterRole:
    """Epoch, replicas and the replication requests of a master."""

    def __init__(self, context: BrokerContext, settings: BrokerSettings) -> None:
        store = context.store
        self.context = context
        self.replicas = ReplicaSet(
            log_end=lambda: store.commitlog.write_offset,
            sync=settings.replication is ReplicationMode.SYNC,
            lag_max_s=settings.replica_lag_max_ms / 1000,
            accept_alone=settings.replication_accept_alone,
        )
        self.processor = ReplicationProcessor(context, self.replicas, epoch=self.epoch)
        self._tick: asyncio.Task[None] | None = None

    def epoch(self) -> int:
        current = self.context.store.epochs.current
        return 0 if current is None else current.epoch

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REPLICA_HANDSHAKE: self.processor.handshake,
            RequestCode.REPLICATE_LOG: self.processor.replicate,
            RequestCode.REPLICA_METADATA: self.processor.metadata,
        }

    def start(self, server: RemotingServer) -> None:
        """Begin a new epoch at the log's end and serve replicas (before serving requests)."""
        store = self.context.store
        epoch = self.epoch() + 1
        store.epochs.begin(epoch, store.commitlog.write_offset)
        log.info("master in epoch %d from offset %d", epoch, store.commitlog.write_offset)
        self.context.replicas = self.replicas
        self.context.log_grew = self.processor.log_grew
        if self.replicas.sync:
            store.replicated = self.replicas.gate
        server.on_disconnect.append(self.processor.connection_closed)
        self._tick = asyncio.create_task(self._judge(), name="replica-set")

    async def _judge(self) -> None:
        """Silence counts too: re-judge the in-sync set a few times per lag allowance."""
        interval = max(self.replicas.lag_max_s / 4, 0.05)
        while True:
            await asyncio.sleep(interval)
            self.replicas.tick(time.monotonic())

    async def stop(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick
            self._tick = None
        self.replicas.close()
        self.context.store.replicated = None


class ReplicaRole:
    """The follower of a replica."""

    def __init__(self, context: BrokerContext, settings: BrokerSettings) -> None:
        assert settings.master_address is not None
        master = self.master = settings.master_address
        self.context = context
        self.follower = Follower(
            context.store,
            lambda: master,
            replica_id=f"{settings.broker_name}-{settings.broker_id}@{context.address}",
            on_appended=self._appended,
        )
        self._task: asyncio.Task[None] | None = None

    def handlers(self) -> dict[int, Handler]:
        """Writes are refused as Apache RocketMQ's slave refuses them: clients and admins
        write to the master."""
        return dict.fromkeys(REPLICA_REFUSES, self._refuse)

    def _refuse(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        return request.respond(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{self.context.address}] is a replica of {self.master}: "
            "writes go to the master",
        )

    def start(self, server: RemotingServer) -> None:
        self.context.store.is_replica = True
        self._task = asyncio.create_task(self.follower.run(), name="follower")

    def _appended(self, appended: Appended) -> None:
        waiters = self.context.waiters
        store = self.context.store
        for (topic, queue_id), codes in appended.items():
            if waiters.holding(topic, queue_id):
                waiters.notify(topic, queue_id, store.max_offset(topic, queue_id), codes)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.follower.close()


Role = MasterRole | ReplicaRole


def role_for(context: BrokerContext, settings: BrokerSettings) -> Role:
    if settings.broker_id == 0:
        return MasterRole(context, settings)
    return ReplicaRole(context, settings)
