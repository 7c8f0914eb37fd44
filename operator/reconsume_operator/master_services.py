"""Each replicated broker's stable address: the Service ``<broker>-master`` without a selector
and its one EndpointSlice of the same name, which the broker's master of the moment points at
its own pod's master ports (``--master-service``, ``--master-port``, ``--master-grpc-port``,
:mod:`reconsume.broker.master_endpoint`) and registers with the name servers by the Service's
cluster IP and port 10911. RocketMQ 4.x clients cache routes for 30 s: with
the pod address in them a failover or a rolling update's hand-over left them writing to the old
master until then; with this one they reconnect to the same address and reach the new master.
RocketMQ 5's clients likewise: the master gives the Service's port 8081 as its gRPC endpoint.

The operator creates both; it applies the Service on every pass but creates the slice only when
it is missing and never writes it again (the brokers do). Brokers may only get their Services
and get and update their slices (the rules of :func:`endpoint_rules`, in the Role of their
Leases).

A slice's address type is immutable and must be the Service's IP family (kube-proxy reads the
slices of its family only), which the API server picks: the cluster's first family unless the
Service says otherwise. So the slice is created after its Service is applied, with the applied
Service's family (:func:`address_type`), and a slice of the other family (earlier versions
created IPv4 ones only) is replaced (:func:`ensure_slice`). The pods still listen on IPv4 only
(docs/operator.md): this is what an IPv6-first cluster needs of the slices, not all it needs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.kube import ChildWriter
from reconsume_operator.naming import (
    BROKER_GRPC_MASTER_PORT,
    BROKER_GRPC_PORT,
    BROKER_MASTER_PORT,
    BROKER_PORT,
    broker_names,
    meta,
)

DISCOVERY_API = "discovery.k8s.io/v1"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label that ties an EndpointSlice to its Service (kube-proxy and DNS read it)."""
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "reconsume-broker"
"""Not the EndpointSlice controller's value: it leaves the slice alone."""
COMPONENT = "broker-master"
SLICE_KIND = "EndpointSlice"

log = logging.getLogger(__name__)


def master_service_name(broker: str) -> str:
    """The stable Service of the broker named ``broker`` (``<cluster>-broker-N``)."""
    return f"{broker}-master"


def master_services(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """One Service per broker, without a selector: its endpoints are the slice's."""
    if not spec.replicated:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(master_service_name(broker), spec, COMPONENT),
            "spec": {
                "type": "ClusterIP",
                "ports": [
                    {"name": "broker", "port": BROKER_PORT, "protocol": "TCP"},
                    {"name": "grpc", "port": BROKER_GRPC_PORT, "protocol": "TCP"},
                ],
            },
        }
        for broker in broker_names(spec.name, count)
    ]


def master_slices(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """The Services' slices as the operator creates them: no endpoint until a master claims
    one, on its master port (created when missing, never updated)."""
    if not spec.replicated:
        return []
    slices = []
    for broker in broker_names(spec.name, count):
        name = master_service_name(broker)
        metadata = meta(name, spec, COMPONENT)
        metadata["labels"] |= {SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY}
        slices.append(
            {
                "apiVersion": DISCOVERY_API,
                "kind": SLICE_KIND,
                "metadata": metadata,
                "addressType": "IPv4",
                "endpoints": [],
                "ports": [
                    {"name": "broker", "port": BROKER_MASTER_PORT, "protocol": "TCP"},
                    {"name": "grpc", "port": BROKER_GRPC_MASTER_PORT, "protocol": "TCP"},
                ],
            }
        )
    return slices


def endpoint_rules(spec: ClusterSpec, count: int) -> list[dict[str, Any]]:
    """What the brokers need of their Services and slices, by name."""
    names = [master_service_name(broker) for broker in broker_names(spec.name, count)]
    return [
        {"apiGroups": [""], "resources": ["services"], "resourceNames": names, "verbs": ["get"]},
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "resourceNames": names,
            "verbs": ["get", "update"],
        },
    ]


def is_master_service(obj: Mapping[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return bool(obj["kind"] == "Service" and labels.get("app.kubernetes.io/component") == COMPONENT)


def address_type(service: Mapping[str, Any] | None) -> str:
    """The address type of the slice of ``service`` as the API server has it: its first IP
    family (IPv4 when it shows none, as before dual-stack)."""
    families = ((service or {}).get("spec") or {}).get("ipFamilies") or ["IPv4"]
    return "IPv6" if families[0] == "IPv6" else "IPv4"


def ensure_slice(writer: ChildWriter, wanted: Mapping[str, Any]) -> bool:
    """Create the slice ``wanted`` (its ``addressType`` set from its Service) unless one of that
    name and address type exists; one of the other type is deleted first (its address type
    cannot change, and no master could have claimed it: a pod's address is of the cluster's
    family). Whether a slice was created."""
    metadata = wanted["metadata"]
    namespace, name = metadata.get("namespace") or "", metadata["name"]
    found = writer.get(DISCOVERY_API, SLICE_KIND, namespace, name)
    if found is not None:
        if found.get("addressType") == wanted["addressType"]:
            return False
        log.warning(
            "EndpointSlice %s/%s holds %s addresses, its Service %s: replacing it",
            namespace,
            name,
            found.get("addressType"),
            wanted["addressType"],
        )
        uid = (found.get("metadata") or {}).get("uid")
        writer.delete(DISCOVERY_API, SLICE_KIND, namespace, name, uid)
    return writer.create_missing(wanted)
