"""Failover: the election's result applied to the broker, every renewal interval.

Each step reads (and, as master, renews) the lease (:class:`~reconsume.broker.election.Elector`)
and makes the broker what it says: the master (its epoch the lease's), or a replica of the
address the lease names. The store's :attr:`~reconsume.store.MessageStore.writable_until` follows
every successful renewal, so a master that stops renewing (frozen, cut off from the lease's
store) stops appending on its own before any replica may take over, and a master that learns it
was deposed turns replica at once: its log is cut back, in the handshake with the new master,
to what the new master has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from reconsume.broker.context import BrokerContext
from reconsume.broker.election import Elector, Leadership
from reconsume.broker.kube_lease import KubeLeaseStore, kube_lease_store
from reconsume.broker.lease import FileLeaseStore, LeaseStore
from reconsume.broker.master_endpoint import (
    GRPC_PORT_NAME,
    PORT_NAME,
    MasterEndpoint,
    MasterService,
    SideServer,
)
from reconsume.broker.registration import Registrar
from reconsume.broker.roles import MasterRole, ReplicaRole, Role
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.engine.delays import DelayLevels
from reconsume.errors import StoreError
from reconsume.store import MessageStore
from reconsume.wire.dispatcher import Handler
from reconsume.wire.endpoints import RemotingServer

log = logging.getLogger(__name__)

HAND_OVER_WAIT_S = 2.0
"""At most this long a stopping master waits for its in-sync replicas to store its log."""


class Failover:
    def __init__(
        self,
        elector: Elector,
        store: MessageStore,
        become: Callable[[Leadership], Awaitable[None]],
    ) -> None:
        self.elector = elector
        self.store = store
        self._become = become
        self._task: asyncio.Task[None] | None = None
        self.current: Leadership | None = None

    async def first(self) -> Leadership:
        """The first step, before the broker serves: its first role."""
        leadership = await self.elector.step()
        self.current = leadership
        return leadership

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="failover")

    async def _run(self) -> None:
        elector = self.elector
        while True:
            await asyncio.sleep(elector.renew_interval_s)
            leadership = await elector.step()
            if leadership.master:
                self.store.writable_until = elector.valid_until
            if leadership != self.current:
                log.info(
                    "%s in epoch %d (master %s)",
                    "master" if leadership.master else "replica",
                    leadership.epoch,
                    leadership.master_address,
                )
            await self._become(leadership)  # unchanged: it finishes what is left (a claim)
            self.current = leadership

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class RoleKeeper:
    """The broker's role: taken at start (fixed by the settings, or elected), changed by
    :class:`Failover`, handed over on a clean stop."""

    def __init__(
        self,
        context: BrokerContext,
        settings: BrokerSettings,
        delays: DelayLevels,
        server: RemotingServer,
        handlers: dict[int, Handler],
        register: Callable[[int, Handler], None],
        registrar: Registrar,
        grpc: SideServer | None = None,
    ) -> None:
        """``grpc``: the broker's gRPC service, when it serves one (a master serves it on its
        master Service too)."""
        self.context = context
        self.settings = settings
        self.delays = delays
        self.server = server
        self.handlers = handlers
        self._register = register
        self.registrar = registrar
        self._grpc = grpc
        self.identity = f"{settings.broker_name}-{settings.broker_id}"
        """This broker among those of its name (the lease and the in-sync set use it)."""
        self.role: Role | None = None
        self.failover: Failover | None = None
        self.master_service: MasterService | None = None
        """With ``--master-service``: the stable address each master takes on."""
        if settings.election is not None:
            self.failover = Failover(self._elector(), context.store, self.become)

    def _elector(self) -> Elector:
        settings = self.settings
        scheme, _sep, where = (settings.election or "").partition(":")
        duration_s = settings.lease_duration_ms / 1000
        store: LeaseStore = FileLeaseStore(where)
        if scheme == "kube":
            # A request that hangs must end well before the master's lease does.
            lease = kube_lease_store(
                where,
                api=settings.kube_api,
                token_file=settings.kube_token_file,
                ca_file=settings.kube_ca_file,
                timeout_s=min(5.0, max(0.25, duration_s / 4)),
            )
            if settings.master_service is not None:
                listeners: dict[str, tuple[SideServer, int]] = {
                    PORT_NAME: (self.server, settings.master_port)
                }
                if self._grpc is not None:
                    listeners[GRPC_PORT_NAME] = (self._grpc, settings.master_grpc_port)
                self.master_service = MasterService(
                    MasterEndpoint(lease.api, lease.namespace, settings.master_service),
                    listeners,
                    self.registrar,
                    listen_host=settings.listen_host,
                    own_address=self.context.address,
                    identity=self.identity,
                )
            store = lease
        return Elector(
            store,
            self.identity,
            self.context.address,
            duration_s=duration_s,
            margin_s=duration_s / 5,
            preferred=settings.broker_id == 0,
            unclean=settings.replication is ReplicationMode.ASYNC
            or settings.replication_accept_alone,
            floor_epoch=self._log_epoch,
        )

    def _log_epoch(self) -> int:
        current = self.context.store.epochs.current
        return 0 if current is None else current.epoch

    def stable_grpc_address(self) -> str | None:
        """The master Service's gRPC address while this broker is master and has claimed
        it (None: its own gRPC address is the one to give)."""
        if self.master_service is None or not isinstance(self.role, MasterRole):
            return None
        return self.master_service.grpc_address

    def failovers(self) -> int:
        return 0 if self.failover is None else self.failover.elector.takeovers

    async def start(self) -> None:
        """The first role, before the broker serves."""
        settings = self.settings
        leadership = Leadership(settings.broker_id == 0, 0, settings.master_address)
        if self.failover is not None:
            store = self.failover.elector.store
            if isinstance(store, KubeLeaseStore):
                await store.check_access()  # refused credentials end the start, clearly
            leadership = await self.failover.first()
        await self._take(leadership)

    def start_failover(self) -> None:
        if self.failover is not None:
            self.failover.start()

    async def _take(self, leadership: Leadership) -> None:
        """Become what ``leadership`` says: handlers, role, registration."""
        context, settings = self.context, self.settings
        role: Role
        if leadership.master:
            elector = None if self.failover is None else self.failover.elector
            epoch = leadership.epoch if elector is not None else None
            role = MasterRole(context, settings, self.delays, epoch=epoch, elector=elector)
        else:
            role = ReplicaRole(context, self.identity, leadership.master_address)
        for code, handler in {**self.handlers, **role.handlers()}.items():
            self._register(code, handler)
        await role.start(self.server)
        self.role = role
        # a replica registers under an id of its own: with an election its index + 1
        replica_id = settings.broker_id + (1 if self.failover is not None else 0)
        self.registrar.broker_id = 0 if leadership.master else replica_id
        self.registrar.broker_addr = context.address
        self.registrar.stable = False
        self.registrar.epoch = leadership.epoch
        self.registrar.topics_changed()
        if leadership.master and self.master_service is not None:
            self.master_service.serve(leadership.epoch)

    async def become(self, leadership: Leadership) -> None:
        """Failover's hook: change role, or only the master a replica follows."""
        role = self.role
        if isinstance(role, ReplicaRole) and not leadership.master:
            if role.master != leadership.master_address:
                role.master = leadership.master_address
                role.follower.master_changed()
            return
        if isinstance(role, MasterRole) and leadership.master:
            if self.master_service is not None:
                self.master_service.retry()
            return
        if self.master_service is not None:
            await self.master_service.stop()
        if role is not None:
            await role.stop()
        await self._take(leadership)

    async def hand_over(self) -> None:
        """Stop electing and, as master, hand the lease over (while replicas are still
        connected: they store the rest of the log first)."""
        if self.failover is not None:
            await self.failover.stop()
            await self._hand_over()

    async def stop(self) -> None:
        await self.hand_over()
        if self.master_service is not None:
            await self.master_service.stop()
        if self.role is not None:
            await self.role.stop()
            self.role = None

    async def _hand_over(self) -> None:
        """A master stopping cleanly stops appending, lets its in-sync replicas store its
        whole log (up to ``HAND_OVER_WAIT_S``) and gives the lease up: a replica takes over at
        its next look instead of after the lease's whole duration."""
        role, failover = self.role, self.failover
        if not isinstance(role, MasterRole) or failover is None or not failover.elector.master:
            return
        store = role.context.store
        store.writable_until = 0.0
        if role.replicas.in_sync:
            stored = asyncio.wrap_future(role.replicas.caught_up(store.commitlog.write_offset))
            with contextlib.suppress(TimeoutError, StoreError):
                async with asyncio.timeout(HAND_OVER_WAIT_S):
                    await stored
        await failover.elector.release()
        if self.master_service is not None:
            # its clients connect again at once, to the replica that takes the lease over
            await self.master_service.stop()
