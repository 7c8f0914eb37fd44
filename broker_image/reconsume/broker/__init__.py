"""The broker: an asyncio server speaking the RocketMQ 4.x remoting protocol over the store."""

from reconsume.broker.server import Broker
from reconsume.broker.settings import BrokerSettings

__all__ = ["Broker", "BrokerSettings"]
