"""The gRPC server: ``apache.rocketmq.v2.MessagingService`` on the broker's event loop
(:mod:`reconsume.wire.h2`, the broker's own HTTP/2 and gRPC), each method answered from the
broker's own handlers.

Served: QueryRoute, Heartbeat, SendMessage, QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, Telemetry (settings),
NotifyClientTermination. A method not listed answers gRPC's UNIMPLEMENTED, as any gRPC server
does for a method it lacks. A request the service refuses is answered with a Status carrying
the proxy's code (the call itself succeeds, as with Apache RocketMQ's proxy); a request that
does not decode fails the call with INVALID_ARGUMENT and closes nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from reconsume.access.guard import AclGuard
from reconsume.broker.context import BrokerContext
from reconsume.broker.messaging import produce
from reconsume.broker.messaging.auth import (
    Access,
    consume_needs,
    route_needs,
    send_needs,
)
from reconsume.broker.messaging.clients import GrpcClients
from reconsume.broker.messaging.consume import ConsumeService
from reconsume.broker.messaging.local import LocalConnections, peer_of
from reconsume.broker.messaging.pop import PopEngine
from reconsume.broker.messaging.routes import Routes
from reconsume.broker.messaging.settings import answer as settings_answer
from reconsume.broker.messaging.status import Refused, status
from reconsume.errors import InvalidArgumentError, RemotingError
from reconsume.message.names import validate_topic
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.h2.api import Abort, CallContext, Method, StatusCode, unary, unary_now
from reconsume.wire.h2.connection import H2Connection
from reconsume.wire.h2.server import GrpcServer
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.side_listener import SideListener
from reconsume.wire.tls import TlsServerConfig
from reconsume.wire.v2 import definition_pb2 as pb
from reconsume.wire.v2 import service_pb2 as spb

log = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
SEND_TIMEOUT_S = 10.0
"""The longest a send waits for the broker's answer (Sync flush or replication included)."""
CLIENT_ID = "x-mq-client-id"

Request = TypeVar("Request", bound=Message)
Response = TypeVar("Response", bound=Message)


def _client_id(context: CallContext) -> str:
    return context.metadata.get(CLIENT_ID, "")


def _topic(resource: pb.Resource) -> None:
    try:
        validate_topic(resource.name)
    except InvalidArgumentError as exc:
        raise Refused(pb.ILLEGAL_TOPIC, str(exc)) from exc


class Malformed:
    """What a request that is not its message type decodes to: the call is failed with
    INTERNAL "Invalid protobuf byte sequence", as grpc-java (Apache RocketMQ's proxy) fails
    it, and nothing else."""

    def __init__(self, error: str) -> None:
        self.error = error

    def refusal(self) -> Abort:
        return Abort(StatusCode.INTERNAL, f"Invalid protobuf byte sequence: {self.error}")


def _parser(request_type: type[Request]) -> Callable[[bytes], Request | Malformed]:
    def parse(data: bytes) -> Request | Malformed:
        try:
            return request_type.FromString(data)
        except DecodeError as exc:
            return Malformed(str(exc))

    return parse


def _failure(
    exc: Exception, request_type: type[Request], response_type: type[Response]
) -> Response:
    """The response of a unary call whose behavior raised: a refusal's Status, a remoting
    error as INTERNAL_SERVER_ERROR, and a bug likewise, logged (it answers this call only,
    never the service)."""
    if isinstance(exc, Refused):
        return response_type(status=exc.status())
    if isinstance(exc, RemotingError):
        return response_type(status=status(pb.INTERNAL_SERVER_ERROR, str(exc)))
    log.error("gRPC %s failed", request_type.DESCRIPTOR.name, exc_info=exc)
    return response_type(status=status(pb.INTERNAL_SERVER_ERROR, repr(exc)))


def _unary(
    behavior: Callable[[Request, CallContext], Awaitable[Response]],
    request_type: type[Request],
    response_type: type[Response],
) -> Method:
    """A unary method whose refusals become the response's Status."""

    async def run(request: Request | Malformed, context: CallContext) -> Response:
        if isinstance(request, Malformed):
            raise request.refusal()
        try:
            return await behavior(request, context)
        except Exception as exc:  # noqa: BLE001 - a bug answers this call only (logged there)
            return _failure(exc, request_type, response_type)

    return unary(run, _parser(request_type), response_type.SerializeToString)


def _unary_now(
    behavior: Callable[[Request, CallContext], Response],
    request_type: type[Request],
    response_type: type[Response],
) -> Method:
    """:func:`_unary` of a behavior that never waits: answered in the turn its request
    completes, without a task."""

    def run(request: Request | Malformed, context: CallContext) -> Response:
        if isinstance(request, Malformed):
            raise request.refusal()
        try:
            return behavior(request, context)
        except Exception as exc:  # noqa: BLE001 - a bug answers this call only (logged there)
            return _failure(exc, request_type, response_type)

    return unary_now(run, _parser(request_type), response_type.SerializeToString)


class MessagingService:
    """The broker's gRPC port; :meth:`start` on the broker's loop, :meth:`stop` before the
    broker stops."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        context: Callable[[], BrokerContext],
        routes: Routes,
        guard: Callable[[], AclGuard | None] = lambda: None,
        tls: TlsServerConfig | None = None,
    ) -> None:
        self._connections = LocalConnections(dispatcher)
        self.access = Access(guard)
        self._context = context
        self.routes = routes
        self._tls = tls
        """Every port of the service: TLS only when on."""
        self._server = GrpcServer(
            {f"/{SERVICE}/{name}": method for name, method in self._handlers().items()}
        )
        self._started = False
        self._telemetry: dict[str, int] = {}
        """Open Telemetry streams per client id: a client with one is connected."""
        self.pop = PopEngine(context, lambda client: self._telemetry.get(client, 0) > 0)
        self.consume = ConsumeService(context, self.pop)
        self.clients = GrpcClients(dispatcher, context)

    def _handlers(self) -> dict[str, Method]:
        return {
            "QueryRoute": _unary(self.query_route, spb.QueryRouteRequest, spb.QueryRouteResponse),
            "Heartbeat": _unary_now(self.heartbeat, spb.HeartbeatRequest, spb.HeartbeatResponse),
            "SendMessage": _unary(
                self.send_message, spb.SendMessageRequest, spb.SendMessageResponse
            ),
            "QueryAssignment": _unary(
                self.query_assignment, spb.QueryAssignmentRequest, spb.QueryAssignmentResponse
            ),
            "NotifyClientTermination": _unary_now(
                self.notify_termination,
                spb.NotifyClientTerminationRequest,
                spb.NotifyClientTerminationResponse,
            ),
            "ReceiveMessage": Method(
                "server_stream",
                _parser(spb.ReceiveMessageRequest),
                spb.ReceiveMessageResponse.SerializeToString,
                self.receive_message,
            ),
            "AckMessage": _unary_now(
                self.ack_message, spb.AckMessageRequest, spb.AckMessageResponse
            ),
            "ChangeInvisibleDuration": _unary_now(
                self.change_invisible_duration,
                spb.ChangeInvisibleDurationRequest,
                spb.ChangeInvisibleDurationResponse,
            ),
            "ForwardMessageToDeadLetterQueue": _unary_now(
                self.forward_to_dead_letters,
                spb.ForwardMessageToDeadLetterQueueRequest,
                spb.ForwardMessageToDeadLetterQueueResponse,
            ),
            "Telemetry": Method(
                "bidi",
                _parser(spb.TelemetryCommand),
                spb.TelemetryCommand.SerializeToString,
                self.telemetry,
            ),
        }

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 picks a port); returns the port."""
        bound = await self._server.start(host, port, self._tls)
        self._started = True
        self.pop.start()
        return bound

    async def listen_also(self, host: str, port: int) -> SideListener[H2Connection]:
        """Serve on another port as well, until :meth:`SideListener.close`
        (:meth:`GrpcServer.listen_also`): a replicated broker's master port."""
        return await self._server.listen_also(host, port, self._tls)

    @property
    def transport_stats(self) -> TransportStats | None:
        return self._server.stats if self._started else None

    async def stop(self, grace_s: float = 1.0) -> None:
        await self._server.stop(grace_s)
        self._started = False
        await self.pop.stop()

    # ------------------------------------------------------------------ methods
    async def query_route(
        self, request: spb.QueryRouteRequest, context: CallContext
    ) -> spb.QueryRouteResponse:
        _topic(request.topic)
        self.access.check(context, route_needs(request.topic.name))
        queues = await self.routes.message_queues(request.topic)
        return spb.QueryRouteResponse(status=status(pb.OK), message_queues=queues)

    def heartbeat(
        self, request: spb.HeartbeatRequest, context: CallContext
    ) -> spb.HeartbeatResponse:
        group = request.group.name if request.HasField("group") else ""
        self.access.check(context, consume_needs(group, "") if group else ())
        self.clients.heartbeat(
            _client_id(context), peer_of(context.peer()), group, request.client_type
        )
        return spb.HeartbeatResponse(status=status(pb.OK))

    def notify_termination(
        self, _request: spb.NotifyClientTerminationRequest, context: CallContext
    ) -> spb.NotifyClientTerminationResponse:
        self.access.check(context, ())
        self.clients.left(_client_id(context))
        return spb.NotifyClientTerminationResponse(status=status(pb.OK))

    async def query_assignment(
        self, request: spb.QueryAssignmentRequest, context: CallContext
    ) -> spb.QueryAssignmentResponse:
        _topic(request.topic)
        self.access.check(context, consume_needs(request.group.name, request.topic.name))
        config = self._context().store.groups.get(request.group.name)
        fifo = config is not None and config.consume_message_orderly
        assignments = await self.routes.assignments(request.topic, fifo)
        if not assignments:
            return spb.QueryAssignmentResponse(status=status(pb.FORBIDDEN, "no readable queue"))
        return spb.QueryAssignmentResponse(status=status(pb.OK), assignments=assignments)

    async def send_message(
        self, request: spb.SendMessageRequest, context: CallContext
    ) -> spb.SendMessageResponse:
        if not request.messages:
            raise Refused(pb.BAD_REQUEST, "no message to send")
        self.access.check(context, send_needs(m.topic.name for m in request.messages))
        connection = self._connections.of(context.peer())
        max_delay_ms = self._context().settings.timer_max_delay_s * 1000
        entries: list[spb.SendResultEntry] = []
        for message in request.messages:
            _topic(message.topic)
            try:
                command = produce.send_request(message, max_delay_ms)
            except Refused as refused:
                entries.append(spb.SendResultEntry(status=refused.status()))
                continue
            answer = await connection.request(command, SEND_TIMEOUT_S)
            entries.append(produce.entry(message, answer))
        codes = {entry.status.code for entry in entries}
        overall = entries[0].status if len(codes) == 1 else status(pb.MULTIPLE_RESULTS)
        return spb.SendMessageResponse(status=overall, entries=entries)

    async def receive_message(
        self,
        request: spb.ReceiveMessageRequest | Malformed,
        context: CallContext,
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        if isinstance(request, Malformed):
            raise request.refusal()
        try:
            self.access.check(
                context, consume_needs(request.group.name, request.message_queue.topic.name)
            )
        except Refused as refused:
            yield spb.ReceiveMessageResponse(status=refused.status())
            return
        async for response in self.consume.receive(request, _client_id(context)):
            yield response

    def ack_message(
        self, request: spb.AckMessageRequest, context: CallContext
    ) -> spb.AckMessageResponse:
        self.access.check(context, consume_needs(request.group.name, request.topic.name))
        return self.consume.ack(request)

    def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest, context: CallContext
    ) -> spb.ChangeInvisibleDurationResponse:
        self.access.check(context, consume_needs(request.group.name, request.topic.name))
        return self.consume.change_invisible(request)

    def forward_to_dead_letters(
        self,
        request: spb.ForwardMessageToDeadLetterQueueRequest,
        context: CallContext,
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        self.access.check(context, consume_needs(request.group.name, request.topic.name))
        return self.consume.forward(request)

    async def telemetry(
        self,
        commands: AsyncIterator[spb.TelemetryCommand | Malformed],
        context: CallContext,
    ) -> AsyncIterator[spb.TelemetryCommand]:
        """Each Settings the client reports is answered with the server's; the stream stays
        open for as long as the client keeps it (it is how a server reaches a client, and
        what keeps a push consumer's leases renewed)."""
        try:
            self.access.check(context, ())
        except Refused as refused:
            yield spb.TelemetryCommand(status=refused.status())
            return
        client = _client_id(context)
        self._telemetry[client] = self._telemetry.get(client, 0) + 1
        try:
            async for response in self._settings(client, commands, context):
                yield response
        finally:
            self._telemetry[client] -= 1
            if self._telemetry[client] <= 0:
                del self._telemetry[client]
                self.clients.left(client)

    async def _settings(
        self,
        client: str,
        commands: AsyncIterator[spb.TelemetryCommand | Malformed],
        call: CallContext,
    ) -> AsyncIterator[spb.TelemetryCommand]:
        async for command in commands:
            if isinstance(command, Malformed):
                raise command.refusal()
            if not command.HasField("settings"):
                continue  # thread stack traces, verification results: nothing asked them
            context = self._context()
            settings = command.settings
            self.clients.reported(client, settings)
            group = None
            if settings.HasField("subscription"):
                group = context.store.groups.get(settings.subscription.group.name)
            yield spb.TelemetryCommand(
                status=status(pb.OK),
                settings=settings_answer(
                    settings,
                    group,
                    context.delays,
                    max_body_bytes=context.store.settings.max_message_bytes,
                    max_delay_ms=context.settings.timer_max_delay_s * 1000,
                ),
            )
