"""The operator's own settings: one frozen dataclass, read from the command line and the
environment (``RECONSUME_*``), documented field by field with its unit."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconsume import __version__

DEFAULT_IMAGE = f"ghcr.io/reconsume/reconsume:{__version__}"
DEFAULT_DLQ_JOBS_IMAGE = f"ghcr.io/reconsume/dlq-jobs:{__version__}"
DEFAULT_DLQ_JOBS_MAIN_FILE = "local:///opt/reconsume/dlq_main.py"
DEFAULT_PEERING = "reconsume"


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    drift_interval_s: float = 60.0
    """Seconds between drift checks of every ConsumerGroup, Topic and BrokerCluster (a timer
    re-applies whatever differs on the brokers, e.g. a retry topic deleted by hand)."""
    backoff_base_s: float = 2.0
    """Seconds before the first retry of a reconcile that failed on a broker or name server."""
    backoff_max_s: float = 60.0
    """Upper bound of the retry delay in seconds (the delay doubles per attempt up to this)."""
    deletion_timeout_s: float = 600.0
    """Seconds a ConsumerGroup or Topic deletion waits for name servers that do not answer (of
    a cluster that was Ready once) before the resource is released and what it would delete is
    left on the brokers, said in a Warning Event ``LeftOnBrokers``. Without a cluster object,
    with a cluster that never became Ready, or with ``reconsume.io/force-delete``, it is
    released at once."""
    admin_timeout_s: float = 3.0
    """Seconds the admin client waits for one name-server or broker response."""
    metrics_port: int | None = 9090
    """Port of ``/metrics`` (Prometheus); None: no metrics endpoint, 0: any free port."""
    liveness_port: int | None = 8080
    """Port of Kopf's liveness endpoint ``/healthz``; None: none."""
    peering_name: str = DEFAULT_PEERING
    """Name of the KopfPeering (namespaced) or ClusterKopfPeering (cluster-wide) object that
    lets several replicas run with exactly one active."""
    peering_lifetime_s: int = 60
    """Seconds a replica's keep-alive in the peering object counts; a replica silent for this
    long (killed, say) is presumed gone and the next one in priority takes over. Keep-alives
    are sent 5-10 s before it runs out (every second when it is 10 s or less)."""
    namespaces: tuple[str, ...] = ()
    """The namespaces watched (``-n``; empty: the whole cluster or not known), for the peering
    objects created at startup."""
    standalone: bool = False
    """Run without peering (a single replica; no peering CRDs needed)."""
    image: str = DEFAULT_IMAGE
    """Image of name servers and brokers of a BrokerCluster that does not name one: the
    broker image of this version."""
    dlq_jobs_image: str = DEFAULT_DLQ_JOBS_IMAGE
    """Image of the runs of a DeadLetterJob that does not name one (``spec.spark.image``):
    the dlq-jobs image of this version, with ``reconsume dlq`` and Spark."""
    dlq_jobs_main_file: str = DEFAULT_DLQ_JOBS_MAIN_FILE
    """``mainApplicationFile`` of the SparkApplications of DeadLetterJobs (spark-operator
    installed, ``k8s://`` master): the job's Python entry point inside the dlq-jobs image."""
    name_server_template: str | None = None
    """Address (``host:port``, several separated by ``;``) the operator itself uses to reach
    the name servers of an operator-run BrokerCluster, with ``{cluster}`` and ``{namespace}``
    replaced; None: the name-server Service, ``<cluster>-namesrv.<namespace>.svc:9876``. For
    an operator running outside the Kubernetes network (through a tunnel or port-forward) and
    for tests that run the name server as a local process; pods keep using the Service."""
    pod_namespace: str | None = None
    """The namespace of the operator's own pods (``RECONSUME_OPERATOR_NAMESPACE``; the Helm
    chart sets its release namespace). With :attr:`pod_labels`, BrokerCluster
    NetworkPolicies admit the operator's pods to the name servers and brokers; None: not known
    (an operator outside the cluster), and such a policy admits it only through its
    ``spec.networkPolicy.clients``."""
    pod_labels: tuple[tuple[str, str], ...] = ()
    """Labels that select the operator's own pods (``RECONSUME_OPERATOR_POD_LABELS``,
    ``key=value`` pairs separated by commas; the chart sets its pods' selector labels)."""

    def __post_init__(self) -> None:
        if self.drift_interval_s <= 0:
            raise ValueError(f"drift interval must be positive, got {self.drift_interval_s} s")
        if not 0 < self.backoff_base_s <= self.backoff_max_s:
            raise ValueError("backoff needs 0 < base <= max")
        if self.deletion_timeout_s < 0:
            raise ValueError(f"deletion timeout must not be negative: {self.deletion_timeout_s}")
        if self.peering_lifetime_s < 1:
            raise ValueError(f"peering lifetime must be at least 1 s: {self.peering_lifetime_s}")
        if self.name_server_template is not None:
            try:
                self.name_server_template.format(cluster="c", namespace="ns")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"name-server address template {self.name_server_template!r} may use only "
                    f"{{cluster}} and {{namespace}}: {exc}"
                ) from exc
        if (self.pod_namespace is None) != (not self.pod_labels):
            raise ValueError(
                "the operator's pods are known by RECONSUME_OPERATOR_NAMESPACE and "
                "RECONSUME_OPERATOR_POD_LABELS together: set both or neither"
            )
        for key, value in self.pod_labels:
            if not key:
                raise ValueError(f"RECONSUME_OPERATOR_POD_LABELS: a label without a key: ={value}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperatorConfig:
        """Defaults, replaced by ``RECONSUME_DRIFT_SECONDS``, ``RECONSUME_BACKOFF_MAX_SECONDS``,
        ``RECONSUME_METRICS_PORT`` (empty: none), ``RECONSUME_PEERING``,
        ``RECONSUME_PEERING_LIFETIME_SECONDS``, ``RECONSUME_DELETION_TIMEOUT_SECONDS``,
        ``RECONSUME_BROKER_IMAGE``,
        ``RECONSUME_DLQ_JOBS_IMAGE``, ``RECONSUME_DLQ_JOBS_MAIN_FILE``,
        ``RECONSUME_NAMESERVER_ADDRESS_TEMPLATE``, ``RECONSUME_OPERATOR_NAMESPACE`` and
        ``RECONSUME_OPERATOR_POD_LABELS`` when set."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}

        def number(name: str, kind: Callable[[str], float]) -> Any:
            try:
                return kind(env[name].strip())
            except ValueError:
                raise ValueError(
                    f"{name}={env[name]!r} is not a number (a pod gets <SERVICE>_PORT="
                    "tcp://... for each Service of its namespace: set enableServiceLinks: false)"
                ) from None

        if env.get("RECONSUME_DRIFT_SECONDS"):
            values["drift_interval_s"] = number("RECONSUME_DRIFT_SECONDS", float)
        if env.get("RECONSUME_BACKOFF_MAX_SECONDS"):
            values["backoff_max_s"] = number("RECONSUME_BACKOFF_MAX_SECONDS", float)
        if "RECONSUME_METRICS_PORT" in env:
            port = env["RECONSUME_METRICS_PORT"].strip()
            values["metrics_port"] = number("RECONSUME_METRICS_PORT", int) if port else None
        if env.get("RECONSUME_PEERING"):
            values["peering_name"] = env["RECONSUME_PEERING"]
        if env.get("RECONSUME_PEERING_LIFETIME_SECONDS"):
            values["peering_lifetime_s"] = number("RECONSUME_PEERING_LIFETIME_SECONDS", int)
        if env.get("RECONSUME_DELETION_TIMEOUT_SECONDS"):
            values["deletion_timeout_s"] = number("RECONSUME_DELETION_TIMEOUT_SECONDS", float)
        if env.get("RECONSUME_BROKER_IMAGE"):
            values["image"] = env["RECONSUME_BROKER_IMAGE"]
        if env.get("RECONSUME_DLQ_JOBS_IMAGE"):
            values["dlq_jobs_image"] = env["RECONSUME_DLQ_JOBS_IMAGE"]
        if env.get("RECONSUME_DLQ_JOBS_MAIN_FILE"):
            values["dlq_jobs_main_file"] = env["RECONSUME_DLQ_JOBS_MAIN_FILE"]
        if env.get("RECONSUME_NAMESERVER_ADDRESS_TEMPLATE"):
            values["name_server_template"] = env["RECONSUME_NAMESERVER_ADDRESS_TEMPLATE"]
        if env.get("RECONSUME_OPERATOR_NAMESPACE", "").strip():
            values["pod_namespace"] = env["RECONSUME_OPERATOR_NAMESPACE"].strip()
        if env.get("RECONSUME_OPERATOR_POD_LABELS", "").strip():
            values["pod_labels"] = label_pairs(env["RECONSUME_OPERATOR_POD_LABELS"])
        return replace(cls(), **values)


def label_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``a=b,c=d`` as ``(("a", "b"), ("c", "d"))``."""
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"RECONSUME_OPERATOR_POD_LABELS: {item.strip()!r} is not key=value")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def backoff_delay_s(retry: int, config: OperatorConfig) -> float:
    """Seconds before retry number ``retry`` (0 for the first): doubling from the base, bounded
    by the maximum."""
    delay_s: float = config.backoff_base_s * 2.0 ** min(retry, 32)
    return min(config.backoff_max_s, delay_s)
