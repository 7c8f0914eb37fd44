"""A BrokerCluster's status: what its name servers report about its brokers.

:func:`cluster_status` is pure; :func:`observe_cluster` asks the name servers through the
admin client. An operator-run cluster is ``Running`` once as many brokers as the spec asks for
have registered, ``Degraded`` with fewer, ``Pending`` with none (or while its name servers do
not answer yet); an external one is ``Running`` with any broker and ``Failed`` when its name
servers do not answer. ``readyBrokers`` (the ``BROKERS`` column) counts the brokers registered
with a master, for both kinds; like ``brokers`` it is left as it was while the name servers do
not answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconsume.client.admin import BrokerInfo
from reconsume.errors import ReconsumeError
from reconsume.topology.clusters import ClusterSpec
from reconsume.topology.resources import AdminFactory
from reconsume_operator.naming import BROKER_GRPC_PORT, grpc_service, name_server


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    phase: str
    ready: bool
    reason: str
    message: str
    fields: dict[str, Any]


def operator_address(spec: ClusterSpec, template: str | None = None) -> str:
    """The address the operator reaches the cluster's name servers at: an external cluster's,
    else ``template`` with ``{cluster}`` and ``{namespace}`` replaced (the operator setting
    ``RECONSUME_NAMESERVER_ADDRESS_TEMPLATE``), else the name-server Service."""
    if spec.external or template is None:
        return name_server(spec)
    return template.format(cluster=spec.name, namespace=spec.namespace)


def cluster_status(
    spec: ClusterSpec,
    brokers: Sequence[BrokerInfo] | None,
    error: str | None = None,
    address: str | None = None,
) -> ClusterStatus:
    """The status of ``spec`` given the brokers its name servers list (None with ``error``
    when they did not answer at ``address``, by default ``name_server(spec)``)."""
    fields: dict[str, Any] = {"nameServer": name_server(spec)}
    if not spec.external:
        fields["grpcEndpoint"] = (
            f"{grpc_service(spec.name)}.{spec.namespace}.svc:{BROKER_GRPC_PORT}"
        )
    if brokers is None:
        phase = "Failed" if spec.external else "Pending"
        message = f"name server {address or name_server(spec)} did not answer: {error}"
        return ClusterStatus(phase, False, "NameServerUnreachable", message, fields)
    fields["brokers"] = [
        {
            "name": b.name,
            "address": b.master or "",
            "ready": b.master is not None,
            **({} if b.master else {"message": "no master registered"}),
        }
        for b in brokers
    ]
    registered = sum(1 for b in brokers if b.master is not None)
    fields["readyBrokers"] = registered
    if registered == 0:
        return ClusterStatus("Pending", False, "NoBrokers", "no broker is registered", fields)
    if not spec.external and registered < spec.brokers:
        message = f"{registered} of {spec.brokers} brokers registered"
        return ClusterStatus("Degraded", False, "BrokersMissing", message, fields)
    message = f"{registered} broker(s) registered with {name_server(spec)}"
    return ClusterStatus("Running", True, "Running", message, fields)


async def observe_cluster(
    spec: ClusterSpec, admin_factory: AdminFactory, address: str | None = None
) -> ClusterStatus:
    """Ask the name servers at ``address`` (default ``name_server(spec)``) for the brokers."""
    address = address or name_server(spec)
    try:
        async with admin_factory(address) as admin:
            brokers = await admin.brokers(spec.rocketmq_cluster)
    except (ReconsumeError, OSError) as exc:
        return cluster_status(spec, None, str(exc) or type(exc).__name__, address)
    return cluster_status(spec, brokers)
