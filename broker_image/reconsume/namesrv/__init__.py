"""The name server: broker registry and topic routes (RocketMQ's ``namesrv``)."""

from reconsume.namesrv.server import NameServer
from reconsume.namesrv.settings import NamesrvSettings

__all__ = ["NameServer", "NamesrvSettings"]
