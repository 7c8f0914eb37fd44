"""The store's background thread: group commit and periodic flush, checkpoints, offset
tables and retention, each on its own interval."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconsume.store.store import MessageStore

log = logging.getLogger(__name__)


class Background(threading.Thread):
    def __init__(self, store: MessageStore) -> None:
        super().__init__(name=f"store-flush:{store.root.name}", daemon=True)
        self._store = store
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        self._store.group_commit.wake()
        self.join()

    def run(self) -> None:
        store = self._store
        s = store.settings
        now = time.monotonic()
        due = {
            "flush": now + s.flush_interval_ms / 1000,
            "checkpoint": now + s.checkpoint_interval_ms / 1000,
            "tables": now + s.table_flush_interval_ms / 1000,
            "retention": now + s.retention_check_interval_ms / 1000,
        }
        while not self._stopping.is_set():
            timeout = max(0.0, min(due.values()) - time.monotonic())
            store.group_commit.wait_for_work(timeout)
            if self._stopping.is_set():
                break
            now = time.monotonic()
            try:
                # A waiter means someone needs durability now (always so under Sync flush).
                if store.group_commit.pending or now >= due["flush"]:
                    store.flush_commit_log()
                    due["flush"] = now + s.flush_interval_ms / 1000
                if now >= due["checkpoint"]:
                    store.write_checkpoint(clean=False)
                    due["checkpoint"] = now + s.checkpoint_interval_ms / 1000
                if now >= due["tables"]:
                    store.persist_tables()
                    due["tables"] = now + s.table_flush_interval_ms / 1000
                if now >= due["retention"]:
                    store.run_retention()
                    due["retention"] = now + s.retention_check_interval_ms / 1000
            except Exception:
                # Keep flushing: one failed checkpoint or table write must not stop durability.
                log.exception("store maintenance failed for %s", store.root)
                self._stopping.wait(0.1)
