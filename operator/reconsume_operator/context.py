"""What every handler of one operator process shares: its settings, the admin-client factory
and the writer of child objects."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from datetime import UTC, datetime
from threading import Thread
from wsgiref.simple_server import WSGIServer

from reconsume.client.admin import AdminClient
from reconsume.wire.signing import Credentials
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
    credentials: dict[str, Credentials] = field(default_factory=dict)
    """The admin account the operator signs with, by the name-server address of a cluster
    with access control on (:mod:`reconsume_operator.access_sync` fills it)."""
    tls: dict[str, ssl.SSLContext] = field(default_factory=dict)
    """The TLS context of a cluster with ``spec.tls``, by name-server address."""
    acl_locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)

    def admin(self, name_server: str) -> AdminClient:
        """An admin client of the cluster at ``name_server``, with its credentials and TLS
        (else the environment's, as a client outside the operator)."""
        addresses = [a.strip() for a in name_server.split(";") if a.strip()]
        return AdminClient(
            addresses,
            timeout_s=self.config.admin_timeout_s,
            credentials=self.credentials.get(name_server),
            tls=self.tls.get(name_server),
        )

    def acl_lock(self, namespace: str, cluster: str) -> asyncio.Lock:
        """Held while a cluster's ACL is rendered and written: one pass at a time."""
        return self.acl_locks.setdefault((namespace, cluster), asyncio.Lock())

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
