"""A replicated broker's stable address on Kubernetes: a Service without a selector
(``--master-service NAME``, in the Lease's namespace) whose one EndpointSlice, of the same
name, the master of the moment points at its own pod when it takes the lease.

Why: Apache RocketMQ's 4.x clients (and ours, and the Go client) cache a topic's route and read
it again only every 30 s by default. A master that registers its pod address leaves them
sending to a pod that is gone or has turned replica until then. A master that registers the
Service's cluster IP instead keeps the address in their routes valid through failovers and
hand-overs: a client whose connection breaks (or that a replica closes, after refusing its
write) connects again to the same address, and kube-proxy takes it to the new master as soon
as the slice names it. Replicas keep their pod addresses; replication goes pod to pod.

RocketMQ 5's clients are served the same way when the broker serves gRPC: the Service's port
``grpc`` leads to the master's gRPC master port, and the master's gRPC address (in its runtime
info, and so in the routes its brokers' gRPC services answer) is the Service's.

The slice is fenced by the lease's epoch (its annotation ``reconsume.io/epoch``): a master
writes it by compare-and-swap on its ``resourceVersion`` and never over a newer epoch's, so a
deposed master that wakes up in the middle of a claim cannot point clients back at itself.
The operator creates both objects; the broker only gets the Service and gets and updates the
slice (its Role allows nothing more).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconsume.broker.kube_api import KubeApi, KubeApiError, status_error
from reconsume.broker.registration import Registrar
from reconsume.message.address import HostAddress

log = logging.getLogger(__name__)

EPOCH = "reconsume.io/epoch"
"""On the slice: the epoch of the master it names."""
HOLDER = "reconsume.io/holder"
"""On the slice: the broker (``<broker name>-<index>``) it names, for people reading it."""
PORT_NAME = "broker"
"""The Service's remoting port (the operator names it so)."""
GRPC_PORT_NAME = "grpc"
"""The Service's gRPC port, for RocketMQ 5's clients."""
ATTEMPTS = 3
"""Claims tried when the slice changes between reading and writing it."""
RBAC_HINT = (
    "the broker's ServiceAccount needs get on the Service and get and update on its EndpointSlice"
)


class EndpointFenced(KubeApiError):
    """The slice names a master of a newer epoch: this broker's claim is stale."""


@dataclass(frozen=True, slots=True)
class Claimed:
    addresses: Mapping[str, str]
    """What clients connect to, per port name of the Service: its ``clusterIP:port``."""
    previous: str | None
    """The pod address the slice named before (None: none)."""

    @property
    def address(self) -> str:
        """The remoting address: the Service's port :data:`PORT_NAME`."""
        return self.addresses[PORT_NAME]


class Claimer(Protocol):
    """What claims the Service for a master: :class:`MasterEndpoint` (a test's stand-in in
    pure unit tests)."""

    def claim(self, ip: bytes, ports: Mapping[str, int], epoch: int, holder: str) -> Claimed: ...


class Side(Protocol):
    """A port a server listens on beside its own until closed (:meth:`SideServer.listen_also`:
    a :class:`~reconsume.wire.side_listener.SideListener`)."""

    port: int

    async def start_serving(self) -> None: ...

    async def close(self) -> None: ...


class SideServer(Protocol):
    """A server that can listen on a master port as well: the remoting server, the gRPC
    service."""

    async def listen_also(self, host: str, port: int) -> Side: ...


class MasterEndpoint:
    """The Service ``name`` of ``namespace`` and its EndpointSlice, seen through ``api``."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self._service = f"/api/v1/namespaces/{namespace}/services/{name}"
        self._slice = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices/{name}"

    def __repr__(self) -> str:
        return f"Service {self.namespace}/{self.name}"

    def claim(self, ip: bytes, ports: Mapping[str, int], epoch: int, holder: str) -> Claimed:
        """Point the slice at the pod of ``ip`` for ``epoch``, its ``ports`` by name
        (blocking: run it in a worker thread); the Service's addresses of those ports. Raises
        EndpointFenced when a newer epoch holds the slice, and KubeApiError when the API
        server does not answer or refuses."""
        addresses = {name: at for name, at in self.addresses().items() if name in ports}
        if PORT_NAME not in addresses:
            raise KubeApiError(f"{self!r} has no port {PORT_NAME!r}")
        for _attempt in range(ATTEMPTS):
            status, found = self.api.request("GET", self._slice)
            if status != 200:
                raise self._error("get the EndpointSlice of", status, found)
            claimed = _epoch_of(found)
            if claimed > epoch:
                raise EndpointFenced(
                    f"{self!r}: its EndpointSlice names the master of epoch {claimed}, "
                    f"newer than this broker's {epoch}"
                )
            previous = _endpoint_of(found)
            body = slice_body(found, ip, ports, epoch, holder)
            status, document = self.api.request("PUT", self._slice, body)
            if status == 409:
                continue  # changed since read: read it again (it may be a newer epoch's)
            if status != 200:
                raise self._error("update the EndpointSlice of", status, document)
            return Claimed(addresses, previous)
        raise KubeApiError(f"{self!r}: its EndpointSlice kept changing ({ATTEMPTS} attempts)")

    def addresses(self) -> dict[str, str]:
        """``clusterIP:port`` of each of the Service's ports by name (a Service of one
        unnamed port: that port as :data:`PORT_NAME`)."""
        status, service = self.api.request("GET", self._service)
        if status != 200:
            raise self._error("get", status, service)
        spec = service.get("spec") or {}
        cluster_ip = str(spec.get("clusterIP") or "")
        try:
            ip = ipaddress.ip_address(cluster_ip)
        except ValueError:
            raise KubeApiError(f"{self!r} has no cluster IP ({cluster_ip or 'none'})") from None
        ports = spec.get("ports") or []
        if len(ports) == 1 and not ports[0].get("name"):
            ports = [{**ports[0], "name": PORT_NAME}]
        return {
            str(port["name"]): str(HostAddress(ip.packed, int(port.get("port") or 0)))
            for port in ports
            if port.get("name")
        }

    def _error(self, what: str, status: int, document: dict[str, Any]) -> KubeApiError:
        error = status_error(f"{what} {self!r}", status, document)
        if status in (401, 403):
            return type(error)(f"{error} ({RBAC_HINT})", status)
        return error


def slice_body(
    found: dict[str, Any], pod_ip: bytes, ports: Mapping[str, int], epoch: int, holder: str
) -> dict[str, Any]:
    """The slice ``found`` pointing at the pod of ``pod_ip`` alone, on its ``ports`` by name,
    for ``epoch`` (its ``resourceVersion``, labels and address type kept). Raises
    KubeApiError when the pod's address is of another family than the slice's (immutable)
    address type."""
    address = ipaddress.ip_address(pod_ip)
    ip = str(address)
    family = "IPv6" if address.version == 6 else "IPv4"
    address_type = found.get("addressType") or family
    if address_type != family:
        raise KubeApiError(
            f"EndpointSlice {found.get('metadata', {}).get('name')} holds {address_type} "
            f"addresses, the pod's is {ip}"
        )
    metadata = dict(found.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[EPOCH] = str(epoch)
    annotations[HOLDER] = holder
    metadata["annotations"] = annotations
    return {
        **found,
        "metadata": metadata,
        "addressType": address_type,
        "endpoints": [
            {
                "addresses": [ip],
                "conditions": {"ready": True, "serving": True, "terminating": False},
            }
        ],
        "ports": [
            {"name": name, "port": port, "protocol": "TCP"} for name, port in sorted(ports.items())
        ],
    }


def _epoch_of(found: dict[str, Any]) -> int:
    raw = ((found.get("metadata") or {}).get("annotations") or {}).get(EPOCH, "")
    return int(raw) if str(raw).isdigit() else 0


def _endpoint_of(found: dict[str, Any]) -> str | None:
    endpoints = found.get("endpoints") or []
    addresses = (endpoints[0].get("addresses") or []) if endpoints else []
    return str(addresses[0]) if addresses else None


class MasterService:
    """What a master does with its broker name's Service, undone when it stops being master:
    it listens on the master ports too (remoting, and gRPC when it serves it), claims the
    slice for them, and then registers the Service's addresses instead of its own.

    The master ports are why a client that came through the Service never stays with a
    replica: kube-proxy keeps a connection with the pod it was first sent to, and a broker
    that stops being master closes every connection taken there (a replica does not even
    listen on them), so the client connects again and is sent to the master the slice names
    by then. On its own ports a deposed master keeps serving reads as a replica."""

    def __init__(
        self,
        endpoint: Claimer,
        listeners: Mapping[str, tuple[SideServer, int]],
        registrar: Registrar,
        *,
        listen_host: str,
        own_address: str,
        identity: str,
    ) -> None:
        """``listeners``: per port name of the Service (:data:`PORT_NAME`, which must be one,
        and :data:`GRPC_PORT_NAME`), the server that listens on the master port and that
        port (0 picks one)."""
        if PORT_NAME not in listeners:
            raise ValueError(f"a master Service needs its {PORT_NAME!r} listener")
        self.endpoint = endpoint
        self._listeners = dict(listeners)
        self._registrar = registrar
        self._listen_host = listen_host
        self._own = HostAddress.parse(own_address)
        self._identity = identity
        self._sides: dict[str, Side] = {}
        self._epoch: int | None = None
        """The epoch this broker is master in (None: not master)."""
        self._claiming: asyncio.Task[None] | None = None
        self.addresses: Mapping[str, str] = {}
        """The Service's addresses by port name once this master has claimed it."""
        self._last_problem: str | None = None

    @property
    def claimed(self) -> str | None:
        """The Service's remoting address once this master has claimed it."""
        return self.addresses.get(PORT_NAME)

    @property
    def grpc_address(self) -> str | None:
        """The Service's gRPC address once this master has claimed it (None: not claimed,
        or the Service has no gRPC port)."""
        return self.addresses.get(GRPC_PORT_NAME)

    def serve(self, epoch: int) -> None:
        """This broker is master in ``epoch``: listen on the master ports and claim the
        slice, beside the election (its requests must never hold up a renewal of the lease)."""
        self._epoch = epoch
        self.addresses = {}
        self.retry()

    def retry(self) -> None:
        """Listen and claim unless done or under way (each step of the election calls it: a
        failed attempt is tried again)."""
        if self._epoch is None or self.claimed is not None:
            return
        if self._claiming is None or self._claiming.done():
            self._claiming = asyncio.create_task(self._take(self._epoch), name="master-service")

    async def _take(self, epoch: int) -> None:
        for name, (server, port) in self._listeners.items():
            if name in self._sides:
                continue
            try:
                # held before anything is awaited after binding: stop() closes it
                side = self._sides[name] = await server.listen_also(self._listen_host, port)
            except OSError as exc:
                self._problem(f"cannot listen on the {name} master port {port}: {exc}")
                return  # served by its own address meanwhile
            await side.start_serving()
        await self._claim(epoch)

    def _problem(self, problem: str) -> None:
        """Logged once until it changes or a claim succeeds: a step retries every second."""
        if problem != self._last_problem:
            self._last_problem = problem
            log.warning("%s (registered as %s meanwhile; trying again)", problem, self._own)

    async def _claim(self, epoch: int) -> None:
        ports = {name: side.port for name, side in self._sides.items()}
        try:
            claimed = await asyncio.to_thread(
                self.endpoint.claim, self._own.ip, ports, epoch, self._identity
            )
        except KubeApiError as exc:
            self._problem(f"{self.endpoint!r} not claimed: {exc}")
            return
        if self._epoch != epoch:
            return  # no longer this epoch's master: whoever is has claimed it, or will
        self.addresses = dict(claimed.addresses)
        self._last_problem = None
        self._registrar.broker_addr = claimed.address
        self._registrar.stable = True
        self._registrar.topics_changed()
        log.info(
            "%r (%s) leads to %s, ports %s, in epoch %d (before: %s)",
            self.endpoint,
            ", ".join(f"{name} {at}" for name, at in sorted(claimed.addresses.items())),
            ipaddress.ip_address(self._own.ip),
            ", ".join(f"{name} {port}" for name, port in sorted(ports.items())),
            epoch,
            claimed.previous or "nobody",
        )

    async def stop(self) -> None:
        """No longer master: stop claiming, stop listening on the master ports and close the
        connections taken there. (The registration is the role's: a stopping master
        unregisters the Service's address in its epoch, which name servers ignore once a
        newer master has registered it.)"""
        self._epoch = None
        self.addresses = {}
        if self._claiming is not None:
            self._claiming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._claiming
            self._claiming = None
        sides, self._sides = self._sides, {}
        for side in sides.values():
            await side.close()
