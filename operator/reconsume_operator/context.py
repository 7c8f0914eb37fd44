"""What every handler of one operator process shares: its settings, the admin-client factory
and the writer of child objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from threading import Thread
from wsgiref.simple_server import WSGIServer

from reconsume.client.admin import AdminClient
from reconsume_operator.config import OperatorConfig, backoff_delay_s
from reconsume_operator.kube import ChildWriter

GROUP = "reconsume.io"
VERSION = "v1alpha1"
STORAGE_PREFIX = "operator.reconsume.io"
"""Prefix of the annotations Kopf keeps its progress and last-handled spec in. Not
``reconsume.io`` itself: Kopf ignores changes to annotations under its storage prefix, and
changing ``reconsume.io/paused`` or ``reconsume.io/force-delete`` must reach the handlers."""
FINALIZER = f"{STORAGE_PREFIX}/finalizer"


@dataclass
class OperatorContext:
    config: OperatorConfig
    writer: ChildWriter = field(default_factory=ChildWriter)
    metrics: tuple[WSGIServer, Thread] | None = None
    metrics_port: int | None = None

    def admin(self, name_server: str) -> AdminClient:
        addresses = [a.strip() for a in name_server.split(";") if a.strip()]
        return AdminClient(addresses, timeout_s=self.config.admin_timeout_s)

    def backoff_s(self, retry: int) -> float:
        return backoff_delay_s(retry, self.config)

    def close(self) -> None:
        self.writer.close()
        if self.metrics is not None:
            server, thread = self.metrics
            server.shutdown()
            server.server_close()
            thread.join(5)
            self.metrics = None


def utc_now() -> datetime:
    return datetime.now(UTC)
