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
from dataclasses import dataclass
from typing import Any, Protocol

from reconsume.broker.kube_api import KubeApi, KubeApiError, status_error
from reconsume.broker.registration import Registrar
from reconsume.message.address import HostAddress
from reconsume.wire.endpoints import RemotingServer, SideListener

log = logging.getLogger(__name__)

EPOCH = "reconsume.io/epoch"
"""On the slice: the epoch of the master it names."""
HOLDER = "reconsume.io/holder"
"""On the slice: the broker (``<broker name>-<index>``) it names, for people reading it."""
PORT_NAME = "broker"
"""The Service's port the slice serves (the operator names the remoting port so)."""
ATTEMPTS = 3
"""Claims tried when the slice changes between reading and writing it."""
RBAC_HINT = (
    "the broker's ServiceAccount needs get on the Service and get and update on its EndpointSlice"
)


class EndpointFenced(KubeApiError):
    """The slice names a master of a newer epoch: this broker's claim is stale."""


@dataclass(frozen=True, slots=True)
class Claimed:
    address: str
    """What clients connect to: the Service's ``clusterIP:port``."""
    previous: str | None
    """The pod address the slice named before (None: none)."""


class Claimer(Protocol):
    """What claims the Service for a master: :class:`MasterEndpoint` (a test's stand-in in
    pure unit tests)."""

    def claim(self, pod: HostAddress, epoch: int, holder: str) -> Claimed: ...


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

    def claim(self, pod: HostAddress, epoch: int, holder: str) -> Claimed:
        """Point the slice at ``pod`` for ``epoch`` (blocking: run it in a worker thread);
        the Service's address. Raises EndpointFenced when a newer epoch holds the slice, and
        KubeApiError when the API server does not answer or refuses."""
        address = self.address()
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
            body = slice_body(found, pod, epoch, holder)
            status, document = self.api.request("PUT", self._slice, body)
            if status == 409:
                continue  # changed since read: read it again (it may be a newer epoch's)
            if status != 200:
                raise self._error("update the EndpointSlice of", status, document)
            return Claimed(address, previous)
        raise KubeApiError(f"{self!r}: its EndpointSlice kept changing ({ATTEMPTS} attempts)")

    def address(self) -> str:
        """``clusterIP:port`` of the Service's port :data:`PORT_NAME` (its first, if none is
        named so)."""
        status, service = self.api.request("GET", self._service)
        if status != 200:
            raise self._error("get", status, service)
        spec = service.get("spec") or {}
        cluster_ip = str(spec.get("clusterIP") or "")
        ports = spec.get("ports") or []
        named = [p for p in ports if p.get("name") == PORT_NAME] or ports
        try:
            ip = ipaddress.ip_address(cluster_ip)
        except ValueError:
            raise KubeApiError(f"{self!r} has no cluster IP ({cluster_ip or 'none'})") from None
        if not named:
            raise KubeApiError(f"{self!r} has no port")
        return str(HostAddress(ip.packed, int(named[0].get("port") or 0)))

    def _error(self, what: str, status: int, document: dict[str, Any]) -> KubeApiError:
        error = status_error(f"{what} {self!r}", status, document)
        if status in (401, 403):
            return type(error)(f"{error} ({RBAC_HINT})", status)
        return error


def slice_body(found: dict[str, Any], pod: HostAddress, epoch: int, holder: str) -> dict[str, Any]:
    """The slice ``found`` pointing at ``pod`` alone, for ``epoch`` (its ``resourceVersion``,
    labels and address type kept). Raises KubeApiError when the pod's address is of another
    family than the slice's (immutable) address type."""
    ip = str(ipaddress.ip_address(pod.ip))
    family = "IPv6" if pod.is_v6 else "IPv4"
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
        "ports": [{"name": PORT_NAME, "port": pod.port, "protocol": "TCP"}],
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
    it listens on the master port too, claims the slice for that port, and then registers the
    Service's address instead of its own.

    The master port is why a client that came through the Service never stays with a
    replica: kube-proxy keeps a connection with the pod it was first sent to, and a broker
    that stops being master closes every connection taken there (a replica does not even
    listen on it), so the client connects again and is sent to the master the slice names by
    then. On the remoting port a deposed master keeps serving reads as a replica."""

    def __init__(
        self,
        endpoint: Claimer,
        server: RemotingServer,
        registrar: Registrar,
        *,
        listen_host: str,
        port: int,
        own_address: str,
        identity: str,
    ) -> None:
        self.endpoint = endpoint
        self._server = server
        self._registrar = registrar
        self._listen_host = listen_host
        self._port = port
        self._own = HostAddress.parse(own_address)
        self._identity = identity
        self._side: SideListener | None = None
        self._epoch: int | None = None
        """The epoch this broker is master in (None: not master)."""
        self._claiming: asyncio.Task[None] | None = None
        self.claimed: str | None = None
        """The Service's address once this master has claimed it."""
        self._last_problem: str | None = None

    def serve(self, epoch: int) -> None:
        """This broker is master in ``epoch``: listen on the master port and claim the slice,
        beside the election (its requests must never hold up a renewal of the lease)."""
        self._epoch = epoch
        self.claimed = None
        self.retry()

    def retry(self) -> None:
        """Listen and claim unless done or under way (each step of the election calls it: a
        failed attempt is tried again)."""
        if self._epoch is None or self.claimed is not None:
            return
        if self._claiming is None or self._claiming.done():
            self._claiming = asyncio.create_task(self._take(self._epoch), name="master-service")

    async def _take(self, epoch: int) -> None:
        if self._side is None:
            try:
                # held before anything is awaited after binding: stop() closes it
                self._side = await self._server.listen_also(self._listen_host, self._port)
            except OSError as exc:
                self._problem(f"cannot listen on the master port {self._port}: {exc}")
                return  # served by its own address meanwhile
            await self._side.start_serving()
        await self._claim(epoch)

    def _problem(self, problem: str) -> None:
        """Logged once until it changes or a claim succeeds: a step retries every second."""
        if problem != self._last_problem:
            self._last_problem = problem
            log.warning("%s (registered as %s meanwhile; trying again)", problem, self._own)

    async def _claim(self, epoch: int) -> None:
        assert self._side is not None
        pod = HostAddress(self._own.ip, self._side.port)
        try:
            claimed = await asyncio.to_thread(self.endpoint.claim, pod, epoch, self._identity)
        except KubeApiError as exc:
            self._problem(f"{self.endpoint!r} not claimed: {exc}")
            return
        if self._epoch != epoch:
            return  # no longer this epoch's master: whoever is has claimed it, or will
        self.claimed = claimed.address
        self._last_problem = None
        self._registrar.broker_addr = claimed.address
        self._registrar.stable = True
        self._registrar.topics_changed()
        log.info(
            "%r (%s) leads to %s in epoch %d (before: %s)",
            self.endpoint,
            claimed.address,
            pod,
            epoch,
            claimed.previous or "nobody",
        )

    async def stop(self) -> None:
        """No longer master: stop claiming, stop listening on the master port and close the
        connections taken there. (The registration is the role's: a stopping master
        unregisters the Service's address in its epoch, which name servers ignore once a
        newer master has registered it.)"""
        self._epoch = None
        self.claimed = None
        if self._claiming is not None:
            self._claiming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._claiming
            self._claiming = None
        side, self._side = self._side, None
        if side is not None:
            await side.close()
