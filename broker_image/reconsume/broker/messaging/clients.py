"""RocketMQ 5's clients as members of their groups, beside the 4.x clients: a consumer that
sends a Heartbeat is registered in the broker's consumer registry under its client id, with the
subscriptions of the Settings it reported over Telemetry — so GET_CONSUMER_LIST_BY_GROUP,
mqadmin's ``consumerConnection``, ConsumerGroup status and the idle-client sweep see it as
they see a 4.x consumer. It leaves when its last Telemetry stream ends, when it says
NotifyClientTermination, or when it sends no Heartbeat for the broker's idle limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reconsume.broker.consumers import ClientChannel, parse_subscription
from reconsume.broker.context import BrokerContext
from reconsume.broker.messaging.local import LocalConnection
from reconsume.message.configs import PERM_READ_WRITE
from reconsume.message.names import retry_topic
from reconsume.wire.codes import LanguageCode
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.v2 import definition_pb2 as pb

CONSUME_POP = "CONSUME_POP"
"""RocketMQ 5's consume type of clients that pop (``ConsumeType.CONSUME_POP``)."""
_LANGUAGES = {
    pb.JAVA: LanguageCode.JAVA,
    pb.CPP: LanguageCode.CPP,
    pb.DOT_NET: LanguageCode.DOTNET,
    pb.GOLANG: LanguageCode.GO,
    pb.RUST: LanguageCode.RUST,
    pb.PYTHON: LanguageCode.PYTHON,
    pb.PHP: LanguageCode.PHP,
    pb.NODE_JS: LanguageCode.NODE_JS,
}
_CONSUMERS = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER)


class _Presence(LocalConnection):
    """A client's place in the registry: closing it (the idle sweep) makes the client leave."""

    def __init__(
        self, dispatcher: Dispatcher, peer: tuple[str, int], left: Callable[[], None]
    ) -> None:
        super().__init__(dispatcher, peer)
        self._left = left

    def close(self) -> None:
        super().close()
        self._left()


class GrpcClients:
    def __init__(self, dispatcher: Dispatcher, context: Callable[[], BrokerContext]) -> None:
        self._dispatcher = dispatcher
        self._context = context
        self._presence: dict[str, _Presence] = {}
        self._settings: dict[str, pb.Settings] = {}

    def reported(self, client_id: str, settings: pb.Settings) -> None:
        """The Settings a client sent over Telemetry (its subscriptions, its language)."""
        if client_id:
            self._settings[client_id] = settings

    def heartbeat(
        self, client_id: str, peer: tuple[str, int], group: str, client_type: int
    ) -> None:
        """A Heartbeat: a consumer joins (or stays in) its group."""
        if not client_id or not group or client_type not in _CONSUMERS:
            return
        context = self._context()
        presence = self._presence.get(client_id)
        if presence is None:
            presence = _Presence(self._dispatcher, peer, lambda: self.left(client_id))
            self._presence[client_id] = presence
        config = context.find_group(group)
        if config is not None:
            context.ensure_topic(retry_topic(group), config.retry_queue_nums, PERM_READ_WRITE)
        settings = self._settings.get(client_id)
        subscriptions = []
        language = LanguageCode.OTHER
        if settings is not None:
            language = _LANGUAGES.get(settings.user_agent.language, LanguageCode.OTHER)
            for entry in settings.subscription.subscriptions:
                expression = entry.expression
                kind = "SQL92" if expression.type == pb.SQL else "TAG"
                subscriptions.append(
                    parse_subscription(entry.topic.name, expression.expression or "*", kind)
                )
        context.consumers.register_consumer(
            group,
            ClientChannel(presence, client_id, int(language), 0, time.monotonic()),
            consume_type=CONSUME_POP,
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscriptions=subscriptions,
        )

    def left(self, client_id: str) -> None:
        """The client is gone: out of every group."""
        self._settings.pop(client_id, None)
        presence = self._presence.pop(client_id, None)
        if presence is not None:
            self._context().consumers.connection_closed(presence)
