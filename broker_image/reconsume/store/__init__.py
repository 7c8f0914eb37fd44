"""The broker's message store: commit log, consume queues, persisted tables and recovery."""

from reconsume.store.reads import GetResult, GetStatus
from reconsume.store.recovery import RecoveryReport
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.store.store import MessageStore, PutRequest, PutResult, default_tags_code

__all__ = [
    "FlushMode",
    "GetResult",
    "GetStatus",
    "MessageStore",
    "PutRequest",
    "PutResult",
    "RecoveryReport",
    "StoreSettings",
    "default_tags_code",
]
