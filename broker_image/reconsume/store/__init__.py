"""The broker's message store: commit log, consume queues, persisted tables and recovery."""

from reconsume.store.reads import GetResult, GetStatus
from reconsume.store.recovery import RecoveryReport
from reconsume.store.requests import PutRequest, PutResult, TagsCode, default_tags_code
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.store.store import MessageStore

__all__ = [
    "FlushMode",
    "GetResult",
    "GetStatus",
    "MessageStore",
    "PutRequest",
    "PutResult",
    "RecoveryReport",
    "StoreSettings",
    "TagsCode",
    "default_tags_code",
]
