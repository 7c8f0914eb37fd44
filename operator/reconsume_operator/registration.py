"""Every handler of the operator, registered in one Kopf registry with one set of settings.

``register`` takes the registry explicitly so that tests and ``reconsume operator`` each build
their own (the drift timer's interval is fixed when a timer is registered).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
import kubernetes.client

from reconsume.topology import Kind
from reconsume_operator.cluster_handlers import register_clusters
from reconsume_operator.config import OperatorConfig
from reconsume_operator.context import FINALIZER, STORAGE_PREFIX, OperatorContext
from reconsume_operator.dead_letter_jobs import JOB_LABEL
from reconsume_operator.events import install_log_filter
from reconsume_operator.job_handlers import register_jobs
from reconsume_operator.job_kube import JobKube
from reconsume_operator.master_status import LEASE_LABELS
from reconsume_operator.metrics import serve_metrics
from reconsume_operator.peering import ensure_peering
from reconsume_operator.topology_handlers import register_topology
from reconsume_operator.user_handlers import register_users

QUEUEING_ERROR_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Kopf's delays between retries of a failing watch-event processing, in seconds (bounded
by a minute instead of Kopf's ten)."""
WATCH_SERVER_TIMEOUT_S = 300
"""The API server ends each watch after this long and Kopf starts the next one from the last
resource version: without it a watch connection that stalls silently (a proxy or the server
dropping it without a close) leaves one kind unwatched until the operator restarts."""
WATCH_CLIENT_TIMEOUT_S = WATCH_SERVER_TIMEOUT_S + 30
"""The operator's own bound on a watch request, for a server that does not end it in time."""
TIMER_EXIT_POLLING_S = 1.0
"""How often a deleted object's timers are looked at until they have stopped. Kopf stops an
object's timers before it releases the object's finalizer; a timer whose handler is running at
that moment (a reconcile waiting on a name server that does not answer) is looked at again only
after this, which Kopf sets to 60 s: the deletion of a BrokerCluster, Topic or ConsumerGroup
then waited a minute for a pass that ended within seconds."""
WATCH_SELECTORS: dict[tuple[str, str], str] = {
    ("batch", "jobs"): JOB_LABEL,
    ("coordination.k8s.io", "leases"): ",".join(f"{k}={v}" for k, v in LEASE_LABELS.items()),
}
"""Label selectors the API server applies to the watches of kinds the operator does not own.
The handlers' own label filters are applied by Kopf as events arrive: without these the
operator would receive every Job and every Lease of the namespaces it watches — cluster-wide,
each node's heartbeat Lease every 10 s — and decode each to drop it."""


def register(
    registry: kopf.OperatorRegistry,
    config: OperatorConfig,
    *,
    login: bool = True,
    kube: kubernetes.client.Configuration | None = None,
) -> OperatorContext:
    """Register every handler and the settings handler in ``registry``; with ``login`` also
    Kopf's login through ``kubernetes`` (else the caller registers one). Child objects are
    written with ``kube`` (default: the pod's service account, else the kubeconfig)."""
    writer = JobKube(kube)
    ctx = OperatorContext(config, writer)

    @kopf.on.startup(registry=registry)
    def configure(
        settings: kopf.OperatorSettings,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        **_: Any,
    ) -> None:
        if settings.peering.standalone or config.standalone:
            settings.peering.standalone = True
        else:
            # Several replicas: exactly one, the one of the highest priority, acts (replicas of
            # equal priority all pause: a Deployment's replicas use --priority random).
            settings.peering.name = config.peering_name
            settings.peering.mandatory = True
            settings.peering.lifetime = config.peering_lifetime_s
            ensure_peering(
                ctx.writer,
                config.peering_name,
                clusterwide=settings.peering.clusterwide,
                namespaces=config.namespaces,
                logger=logger,
            )
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix=STORAGE_PREFIX
        )
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=STORAGE_PREFIX, key="last-handled-configuration"
        )
        settings.persistence.finalizer = FINALIZER
        settings.posting.enabled = True
        settings.posting.level = logging.WARNING
        settings.posting.loggers = False  # only the operator's own Events (events.py)
        install_log_filter()
        settings.posting.reporting_component = "reconsume-operator"
        settings.queueing.error_delays = QUEUEING_ERROR_DELAYS_S
        settings.execution.default_backoff = config.backoff_max_s
        settings.watching.server_timeout = WATCH_SERVER_TIMEOUT_S
        settings.watching.client_timeout = WATCH_CLIENT_TIMEOUT_S
        for resource, selector in WATCH_SELECTORS.items():
            settings.watching.label_selectors[resource] = selector
        settings.background.cancellation_polling = TIMER_EXIT_POLLING_S
        if config.metrics_port is not None:
            server, thread, port = serve_metrics(config.metrics_port)
            ctx.metrics = (server, thread)
            ctx.metrics_port = port
            logger.info(f"serving /metrics on port {port}")
        if config.pod_namespace is None:
            logger.info(
                "the operator's own pods are not known (RECONSUME_OPERATOR_NAMESPACE, "
                "RECONSUME_OPERATOR_POD_LABELS): a BrokerCluster's NetworkPolicy admits the "
                "operator only as one of its spec.networkPolicy.clients"
            )

    # A registry of our own has none of the login handlers Kopf's default registry gets:
    # credentials of the pod's service account, else $KUBECONFIG, through `kubernetes`.
    if login:
        kopf.on.login(registry=registry, id="login")(kopf.login_via_client)

    @kopf.on.cleanup(registry=registry)
    def close(**_: Any) -> None:
        ctx.close()

    register_clusters(registry, ctx)
    register_topology(registry, ctx, Kind.GROUP)
    register_topology(registry, ctx, Kind.TOPIC)
    register_jobs(registry, ctx, writer)
    register_users(registry, ctx)
    return ctx
