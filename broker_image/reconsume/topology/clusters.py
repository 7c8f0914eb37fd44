"""A BrokerCluster resource as the operator and embedded mode read it.

Both run the same spec: the operator as Kubernetes objects, embedded mode as local processes.
What each takes from it differs (embedded mode has no images, storage or resources), the
defaults and the meaning of ``external`` do not. ``spec.storage`` has no default in the CRD (an
external cluster has no volumes, so its objects do not show one): absent, it is
:data:`DEFAULT_STORAGE_SIZE` of the cluster's default storage class, as ``spec.storage.size``
defaults to when ``storage`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconsume.message.durations import DEFAULT_DELAY_LEVELS

__all__ = ["DEFAULT_DELAY_LEVELS", "DEFAULT_STORAGE_SIZE", "ClusterSpec", "cluster_spec"]

DEFAULT_STORAGE_SIZE = "10Gi"
"""Each broker's volume when ``spec.storage`` (or its ``size``) is absent; the CRD's default of
``spec.storage.size`` and the value its storage rules take for an absent ``storage``."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A BrokerCluster's spec with the CRD's defaults applied."""

    name: str
    namespace: str = "default"
    brokers: int = 2
    replicas: int = 1
    """Pods per broker: its master and ``replicas - 1`` replicas."""
    replication: str = "Sync"
    """``Sync`` or ``Async``; meaningful with ``replicas`` above 1."""
    name_servers: int = 1
    image: str = ""
    storage_size: str = DEFAULT_STORAGE_SIZE
    storage_class: str | None = None
    delay_levels: str = DEFAULT_DELAY_LEVELS
    flush: str = "Async"
    retention_hours: int = 72
    resources: Mapping[str, Any] | None = None
    name_server_resources: Mapping[str, Any] | None = None
    """``spec.nameServerResources``; None when absent (the operator's defaults apply)."""
    external_name_server: str | None = None
    external_cluster_name: str | None = None
    access_enabled: bool | None = None
    """``spec.accessControl.enabled``; None when absent (:attr:`access_control` decides)."""
    admin_secret: str | None = None
    """``spec.accessControl.adminSecret``; None when absent."""
    allowed_addresses: tuple[str, ...] = ()
    """``spec.accessControl.allowedAddresses``: requests from these need no signature."""
    tls_secret: str | None = None
    """``spec.tls.secretName``; None: no TLS on the remoting port."""
    tls_mode: str = "Enforcing"
    tls_client_auth: str = "None"
    network_policy: bool = False
    """``spec.networkPolicy.enabled``: whether the operator restricts who reaches the pods."""
    network_clients: tuple[Mapping[str, Any], ...] = ()
    """``spec.networkPolicy.clients``: NetworkPolicy peers admitted to the client ports
    (empty: any source)."""
    metrics_from: tuple[Mapping[str, Any], ...] = ()
    """``spec.networkPolicy.metricsFrom``: peers admitted to the brokers' HTTP port (empty:
    any source)."""

    @property
    def external(self) -> bool:
        """Whether it names brokers running elsewhere (nothing is run for it)."""
        return self.external_name_server is not None

    @property
    def replicated(self) -> bool:
        """Whether each broker runs with replicas (and elects its master)."""
        return self.replicas > 1 and not self.external

    @property
    def access_control(self) -> bool:
        """Whether requests to the cluster are signed and checked: ``spec.accessControl.enabled``,
        by default on for an operator-run cluster and off for an external one."""
        if self.access_enabled is not None:
            return self.access_enabled
        return not self.external

    @property
    def admin_secret_name(self) -> str | None:
        """The Secret of the account the operator (and, operator-run, the brokers) sign with:
        ``spec.accessControl.adminSecret``, else ``<cluster>-admin`` for an operator-run
        cluster; None when access control is off (or external without one)."""
        if not self.access_control:
            return None
        if self.admin_secret is not None or self.external:
            return self.admin_secret
        return f"{self.name}-admin"

    @property
    def rocketmq_cluster(self) -> str | None:
        """The RocketMQ cluster name whose brokers belong to this resource (None: every one
        the name servers know)."""
        return self.external_cluster_name if self.external else self.name


def cluster_spec(body: Mapping[str, Any], default_image: str = "") -> ClusterSpec:
    """A BrokerCluster object as a :class:`ClusterSpec`; ``default_image`` when it names none."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    storage = spec.get("storage") or {}
    external = spec.get("external")
    access = spec.get("accessControl") or {}
    tls = spec.get("tls") or {}
    network = spec.get("networkPolicy") or {}
    enabled = access.get("enabled")
    return ClusterSpec(
        name=str(metadata["name"]),
        namespace=str(metadata.get("namespace") or "default"),
        brokers=int(spec.get("brokers", 2)),
        replicas=int(spec.get("replicas", 1)),
        replication=str(spec.get("replication") or "Sync"),
        name_servers=int(spec.get("nameServers", 1)),
        image=str(spec.get("image") or default_image),
        storage_size=str(storage.get("size") or DEFAULT_STORAGE_SIZE),
        storage_class=storage.get("storageClassName"),
        delay_levels=str(spec.get("delayLevels") or DEFAULT_DELAY_LEVELS),
        flush=str(spec.get("flush") or "Async"),
        retention_hours=int(spec.get("retentionHours", 72)),
        resources=spec.get("resources"),
        name_server_resources=spec.get("nameServerResources"),
        external_name_server=None if external is None else str(external["nameServer"]),
        external_cluster_name=None if external is None else external.get("clusterName"),
        access_enabled=None if enabled is None else bool(enabled),
        admin_secret=access.get("adminSecret"),
        allowed_addresses=tuple(str(a) for a in access.get("allowedAddresses") or ()),
        tls_secret=tls.get("secretName"),
        tls_mode=str(tls.get("mode") or "Enforcing"),
        tls_client_auth=str(tls.get("clientAuth") or "None"),
        network_policy=bool(network.get("enabled", False)),
        network_clients=tuple(network.get("clients") or ()),
        metrics_from=tuple(network.get("metricsFrom") or ()),
    )
