"""A broker context over a small real store, for tests of what a Sync-replicating master does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reconsume.broker.context import BrokerContext
from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.message.address import HostAddress
from reconsume.store import MessageStore, StoreSettings


@contextmanager
def sync_replicated_context(root: Path, **settings: Any) -> Iterator[BrokerContext]:
    """A context under ``root`` with Sync replication and the broker ``settings`` given."""
    store_settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    broker_settings = BrokerSettings(
        store_dir=str(root), store=store_settings, replication=ReplicationMode.SYNC, **settings
    )
    host = HostAddress.parse("127.0.0.1:10911")
    with MessageStore(root, store_settings, store_host=host, background=False) as store:
        yield BrokerContext(broker_settings, store, host, lambda: None)
