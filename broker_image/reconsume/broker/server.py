"""The broker: a remoting server over one message store, registered with the name servers.

Request handlers live in their own modules (send, send-back, pull, offsets, clients, admin),
wired to request codes by :mod:`reconsume.broker.handlers`; this module registers them, starts
and stops the parts in order, serves the HTTP endpoint (``/metrics``, ``/healthz``,
``/readyz``) and runs the housekeeping RocketMQ's ``ClientHousekeepingService`` does (closing
clients silent for two minutes).

Start: HTTP endpoint, remoting port bound (not yet serving), store opened and recovered in a
worker thread (so ``/healthz`` answers during a long recovery) with the schedule's and the
timer's due-time tag codes, handlers, the schedule and timer services (after one scan for
what a crash left them to deliver again), remoting serving, registration. Stop: not ready at
once, stop accepting, unregister, close client connections, stop the schedule and timer
services (their progress persisted), flush and close the store, stop the HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from prometheus_client.exposition import choose_encoder

from reconsume.access.guard import AclGuard
from reconsume.broker import health
from reconsume.broker.acl_resources import BROKER_RULES
from reconsume.broker.context import BrokerContext
from reconsume.broker.failover import RoleKeeper
from reconsume.broker.handlers import base_handlers, guarded
from reconsume.broker.http_endpoint import HttpEndpoint, Request, Response, text
from reconsume.broker.messaging.routes import Routes
from reconsume.broker.messaging.service import MessagingService
from reconsume.broker.metrics import broker_registry
from reconsume.broker.registration import Registrar
from reconsume.broker.roles import Role
from reconsume.broker.runtime_info import Throughput
from reconsume.broker.settings import BrokerSettings
from reconsume.engine.delays import DelayLevels
from reconsume.engine.scheduled import schedule_tags_code
from reconsume.engine.timer_message import timer_tags_code
from reconsume.errors import ReconsumeError
from reconsume.message.address import HostAddress
from reconsume.store import MessageStore
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient, RemotingServer
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.listen import listen_text
from reconsume.wire.tls_server import TlsListener

log = logging.getLogger(__name__)

CLIENT_MAX_IDLE_S = 120.0
"""A client connection without a heartbeat for this long is closed (RocketMQ's
``channelExpiredTimeout``)."""
HOUSEKEEPING_INTERVAL_S = 10.0


class Broker:
    """One broker process: call :meth:`start`, then :meth:`stop` (from the same event loop)."""

    def __init__(
        self, settings: BrokerSettings, *, on_http_listening: Callable[[str], None] | None = None
    ) -> None:
        self.settings = settings
        self.dispatcher = Dispatcher("broker")
        self.server = RemotingServer(self.dispatcher, tls=settings.tls())
        self.address = ""
        """The advertised ``ip:port``, once started."""
        self.http_address = ""
        """``ip:port`` the HTTP endpoint listens on, once started; empty without one."""
        self.registry = broker_registry(self, settings.metrics_max_queue_series)
        """This broker's Prometheus metrics (``/metrics``)."""
        self._on_http_listening = on_http_listening
        self._http: HttpEndpoint | None = None
        self._store: MessageStore | None = None
        self._context: BrokerContext | None = None
        self._roles: RoleKeeper | None = None
        self._registrar: Registrar | None = None
        self._registrations: Mapping[str, Sequence[int]] = {}
        self._housekeeping: asyncio.Task[None] | None = None
        self._throughput: Throughput | None = None
        self._stopping = False
        self._messaging: MessagingService | None = None
        self._routes_client: RemotingClient | None = None
        self.grpc_address = ""
        """The advertised ``ip:port`` of the gRPC service, once started; empty without one."""

    @property
    def context(self) -> BrokerContext:
        if self._context is None:
            raise RuntimeError("the broker is not started")
        return self._context

    # ------------------------------------------------------------------ observation
    def current_context(self) -> BrokerContext | None:
        return self._context

    def current_role(self) -> Role | None:
        return None if self._roles is None else self._roles.role

    def failovers(self) -> int:
        return 0 if self._roles is None else self._roles.failovers()

    def acl_guard(self) -> AclGuard | None:
        return self.dispatcher.guard if isinstance(self.dispatcher.guard, AclGuard) else None

    def _acl_digest(self) -> str | None:
        return None if (acl := self.acl_guard()) is None else acl.digest

    def tls_listener(self) -> TlsListener | None:
        return self.server.tls

    def grpc_stats(self) -> TransportStats | None:
        return None if self._messaging is None else self._messaging.transport_stats

    def connection_count(self) -> int:
        return len(self.server.connections)

    def registration_results(self) -> Mapping[str, Sequence[int]]:
        return self._registrations

    def readiness(self) -> health.Readiness:
        registrar = self._registrar
        return health.readiness(
            store_open=self._context is not None,
            namesrv_addresses=self.settings.namesrv_addresses,
            registrations=0 if registrar is None else registrar.registrations,
            stopping=self._stopping,
            last_refusal=None if registrar is None else registrar.last_refusal,
        )

    def _metrics(self, request: Request) -> Response:
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(200, encode(self.registry), content_type)

    def _readyz(self, request: Request) -> Response:
        state = self.readiness()
        return text(200 if state.ready else 503, state.reason)

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> str:
        """Serve HTTP, listen, open (and recover) the store, register; returns the advertised
        address."""
        http = self.settings.http_address()
        if http is not None:
            endpoint = HttpEndpoint(
                {
                    "/metrics": self._metrics,
                    "/healthz": lambda _request: text(200, "ok"),
                    "/readyz": self._readyz,
                }
            )
            port = await _listen("http_listen", http[0], http[1], endpoint.start)
            self._http = endpoint
            self.http_address = listen_text(http[0], port)
            log.info("broker %s serving HTTP on %s", self.settings.broker_name, self.http_address)
            if self._on_http_listening is not None:
                self._on_http_listening(self.http_address)
        try:
            return await self._start_broker()
        except BaseException:
            await self._stop_http()
            raise

    async def _start_broker(self) -> str:
        settings = self.settings
        if settings.acl_file is not None:
            # Before the port is bound: a broker with a bad ACL file does not start, and none
            # serves a request unchecked.
            self.dispatcher.guard = AclGuard(
                settings.acl_file, BROKER_RULES, f"broker {settings.broker_name}"
            )

        async def bind(host: str, port: int) -> int:
            return await self.server.start(host, port, start_serving=False)

        port = await _listen("listen", settings.listen_host, settings.listen_port, bind)
        store_host = settings.advertised(port)
        delays = DelayLevels.parse(settings.delay_levels)
        # Schedule-topic and timer-topic entries carry their due time as tag code.
        tags_code = timer_tags_code(schedule_tags_code(delays))
        try:
            # Opened after binding: with port 0 the store host (in every record and offset
            # message id) must carry the port actually bound. The port serves no request
            # before the handlers below exist (start_serving=False until then).
            store = await asyncio.to_thread(
                MessageStore,
                settings.store_dir,
                settings.store_settings(),
                store_host=store_host,
                tags_code=tags_code,
            )
        except BaseException:
            await self.server.stop()
            raise
        self._store = store
        self.address = str(store_host)
        registrar = Registrar(
            namesrv_addresses=settings.namesrv_addresses,
            broker_name=settings.broker_name,
            broker_addr=self.address,
            cluster_name=settings.cluster_name,
            broker_id=settings.broker_id,
            interval_s=settings.register_interval_s,
            topic_wrapper=self._topic_wrapper,
        )
        self._registrar = registrar
        self._registrations = registrar.results
        context = BrokerContext(
            settings,
            store,
            store_host,
            registrar.topics_changed,
            tags_code,
            delays,
            topics_registered=registrar.registered,
        )
        context.flush_answers.as_read = self.dispatcher.as_read
        context.replica_answers.as_read = self.dispatcher.as_read
        self._throughput = throughput = Throughput(context.stats, time.monotonic())
        handlers = base_handlers(context, throughput, self._acl_digest, self._advertised_grpc)
        messaging = self._messaging_service()
        roles = self._roles = RoleKeeper(
            context,
            settings,
            delays,
            self.server,
            handlers,
            lambda code, handler: self.dispatcher.register(code, guarded(handler)),
            registrar,
            messaging,
        )
        await roles.start()
        self.server.on_disconnect.append(context.consumers.connection_closed)
        await self.server.start_serving()
        self._context = context
        registrar.start()
        if (acl := self.acl_guard()) is not None:
            acl.start()
        roles.start_failover()
        if messaging is not None:
            await self._start_messaging(messaging, store_host)
        self._housekeeping = asyncio.create_task(self._housekeep(), name="broker-housekeeping")
        log.info(
            "broker %s of cluster %s listening on %s as %s, store %s (%s flush, TLS %s)",
            settings.broker_name,
            settings.cluster_name,
            listen_text(settings.listen_host, port),
            self.address,
            settings.store_dir,
            settings.flush_mode,
            settings.tls_mode,
        )
        return self.address

    def _messaging_service(self) -> MessagingService | None:
        """The gRPC service of RocketMQ 5's clients, when ``grpc_listen`` asks for it (not
        listening yet: a master may serve it on its master port before
        :meth:`_start_messaging`)."""
        if self.settings.grpc_address() is None:
            return None
        client = self._routes_client = RemotingClient()
        routes = Routes(
            client,
            self.settings.namesrv_addresses,
            lambda: (self._registered_as(), self._advertised_grpc() or ""),
            lambda topic: self.context.topic(topic),
        )
        return MessagingService(
            self.dispatcher, lambda: self.context, routes, self.acl_guard, self.settings.tls()
        )

    async def _start_messaging(self, service: MessagingService, store_host: HostAddress) -> None:
        host, port = self.settings.grpc_address() or ("", 0)
        port = await _listen("grpc_listen", host, port, service.start)
        self._messaging = service
        self.grpc_address = str(HostAddress(store_host.ip, port))
        log.info("broker %s serving gRPC on %s", self.settings.broker_name, self.grpc_address)

    def _advertised_grpc(self) -> str | None:
        """The gRPC address routes give for this broker: as a master with a master Service,
        the Service's; else its own (None: it serves no gRPC)."""
        roles = self._roles
        stable = None if roles is None else roles.stable_grpc_address()
        return stable or self.grpc_address or None

    def _registered_as(self) -> tuple[str, ...]:
        """The remoting addresses routes may name this broker by: its own and, as master, its
        master Service's (``--master-service``)."""
        registrar = self._registrar
        if registrar is None or registrar.broker_addr == self.address:
            return (self.address,)
        return (self.address, registrar.broker_addr)

    def _topic_wrapper(self) -> dict[str, Any]:
        """``TopicConfigSerializeWrapper``: the topic table and its data version."""
        context = self.context
        return {
            "topicConfigTable": {
                name: config.to_dict() for name, config in context.store.topics.items()
            },
            "dataVersion": context.topic_data_version(),
        }

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            if self._throughput is not None:  # the rates of mqadmin's clusterList / brokerStatus
                self._throughput.sample(time.monotonic())
            for connection in self.context.consumers.idle_connections(
                time.monotonic(), CLIENT_MAX_IDLE_S
            ):
                log.warning("closing %s: no heartbeat for %gs", connection.peer, CLIENT_MAX_IDLE_S)
                connection.close()

    async def stop(self) -> None:
        """Turn unready, stop accepting, unregister from the name servers, close client
        connections (held pulls end with them), flush and close the store (tables persisted),
        then stop the HTTP endpoint."""
        self._stopping = True
        self.server.stop_accepting()
        if self._messaging is not None:
            await self._messaging.stop()
            self._messaging = None
        if self._routes_client is not None:
            await self._routes_client.close()
            self._routes_client = None
        if self._roles is not None:
            await self._roles.hand_over()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
            self._housekeeping = None
        if self._registrar is not None:
            await self._registrar.close()
            self._registrar = None
        await self.server.stop()
        if (acl := self.acl_guard()) is not None:
            await acl.stop()
        if self._roles is not None:
            await self._roles.stop()
        self._context = None  # scrapes from here on leave out the closing store
        if self._store is not None:
            self._store.close()
            self._store = None
        await self._stop_http()
        log.info("broker %s stopped", self.settings.broker_name)

    async def _stop_http(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None


async def _listen(
    setting: str, host: str, port: int, bind: Callable[[str, int], Awaitable[int]]
) -> int:
    """``bind(host, port)``, with a failure to bind reported as the setting it comes from."""
    try:
        return await bind(host, port)
    except OSError as exc:
        raise ReconsumeError(
            f"setting {setting}: cannot listen on {listen_text(host, port)}: {exc}"
        ) from exc
