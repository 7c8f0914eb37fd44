"""A broker's master Service on a real kube-apiserver: the objects the operator creates for a
replicated broker (a Service without a selector, its empty EndpointSlice), claimed by masters
with exactly the Role the operator gives brokers. A claim points the slice at the master's pod
and answers the Service's cluster IP; a newer epoch's claim wins over an older one, which is
then fenced; a Service the Role does not name is refused with what the broker needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from reconsume.broker.kube_api import KubeAccessError, KubeApi, KubeApiError, KubeCredentials
from reconsume.broker.master_endpoint import EPOCH, HOLDER, EndpointFenced, MasterEndpoint
from reconsume.message.address import HostAddress
from reconsume.topology.clusters import ClusterSpec, cluster_spec
from reconsume_operator.kube import ChildWriter
from reconsume_operator.master_services import (
    address_type,
    endpoint_rules,
    ensure_slice,
    master_services,
    master_slices,
)

from ..polling import eventually
from ..unit.operator.test_children import resource
from .control_plane import ControlPlane
from .test_broker_lease import namespace, service_account_token

__all__ = ["namespace"]

POD_A = HostAddress.parse("10.244.0.7:0").ip
POD_B = HostAddress.parse("10.244.0.9:0").ip
POD_V6 = HostAddress.parse("[fd00:10:244::7]:0").ip
PORTS = {"broker": 10912, "grpc": 8082}
"""The master ports, as a master that serves gRPC claims them."""


def endpoint(control_plane: ControlPlane, namespace: str, name: str, token: Path) -> MasterEndpoint:
    credentials = KubeCredentials.resolve(
        control_plane.server, str(token), str(control_plane.credentials.ca_cert)
    )
    return MasterEndpoint(KubeApi(credentials, 5.0), namespace, name)


def slice_of(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    # raw: the client's model refuses a slice without endpoints (the API server omits [])
    found = kubernetes.client.DiscoveryV1Api(api).read_namespaced_endpoint_slice(
        name, namespace, _preload_content=False
    )
    document: dict[str, Any] = json.loads(found.data)
    return document


def one_broker(namespace: str) -> tuple[ClusterSpec, dict[str, Any], dict[str, Any]]:
    """A replicated cluster of one broker in ``namespace``: its spec, and its broker's master
    Service and slice as the operator makes them."""
    body = resource(replicas=2, brokers=1)
    body["metadata"]["namespace"] = namespace
    spec = cluster_spec(body, "img:1")
    (service,) = master_services(spec, 1)
    (empty,) = master_slices(spec, 1)
    return spec, service, empty


def claimable(master: MasterEndpoint) -> bool:
    """Whether the Role applies yet (a new RoleBinding takes a moment)."""
    try:
        master.addresses()
    except KubeAccessError:
        return False
    return True


def test_masters_claim_the_service_by_epoch_with_only_the_brokers_role(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    spec, service, empty = one_broker(namespace)
    name = service["metadata"]["name"]
    assert name == "orders-broker-0-master"
    created = kubernetes.client.CoreV1Api(api).create_namespaced_service(namespace, service)
    cluster_ip = created.spec.cluster_ip
    kubernetes.client.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
        namespace, empty, _preload_content=False
    )
    assert not slice_of(api, namespace, name).get("endpoints")  # none until a master claims it
    token = service_account_token(
        api, control_plane, namespace, "broker", endpoint_rules(spec, 1), tmp_path / "token"
    )
    master = endpoint(control_plane, namespace, name, token)
    eventually(lambda: claimable(master), 10, "the Role applies")

    first = master.claim(POD_A, PORTS, 2, "orders-broker-0-0")
    assert (first.address, first.previous) == (f"{cluster_ip}:10911", None)
    assert first.addresses == {"broker": f"{cluster_ip}:10911", "grpc": f"{cluster_ip}:8081"}
    found = slice_of(api, namespace, name)
    assert [e["addresses"] for e in found["endpoints"]] == [["10.244.0.7"]]
    assert found["endpoints"][0]["conditions"]["ready"] is True
    assert found["ports"] == [
        {"name": "broker", "port": 10912, "protocol": "TCP"},
        {"name": "grpc", "port": 8082, "protocol": "TCP"},
    ]
    assert found["metadata"]["annotations"] == {EPOCH: "2", HOLDER: "orders-broker-0-0"}
    assert found["metadata"]["labels"]["kubernetes.io/service-name"] == name

    # The replica that took over in epoch 3 claims it; the deposed master's late claim for
    # epoch 2 is fenced and changes nothing.
    second = master.claim(POD_B, {"broker": 10912}, 3, "orders-broker-0-1")
    assert second.previous == "10.244.0.7"
    assert second.addresses == {"broker": f"{cluster_ip}:10911"}  # a master serving no gRPC
    with pytest.raises(EndpointFenced, match="epoch 3, newer than this broker's 2"):
        master.claim(POD_A, PORTS, 2, "orders-broker-0-0")
    found = slice_of(api, namespace, name)
    assert [e["addresses"] for e in found["endpoints"]] == [["10.244.0.9"]]
    assert found["metadata"]["annotations"][EPOCH] == "3"

    # The Role names the broker's own Service only.
    other = endpoint(control_plane, namespace, "orders-broker-1-master", token)
    with pytest.raises(KubeAccessError, match="get on the Service and get and update"):
        other.claim(POD_A, PORTS, 4, "orders-broker-1-0")


def test_on_an_ipv6_cluster_the_slice_is_ipv6_and_a_master_claims_it(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The operator creates a slice of its Service's IP family, which the API server picks
    (an IPv6 cluster's Services are IPv6: here one asks for it); a slice of the other family,
    as operators before this one left it, is replaced; a master with an IPv6 pod address
    claims it and registers the Service's IPv6 address."""
    spec, service, wanted = one_broker(namespace)
    name = service["metadata"]["name"]
    writer = ChildWriter(control_plane.configuration())
    try:
        kubernetes.client.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
            namespace, wanted, _preload_content=False
        )  # IPv4, as before
        ipv6 = {**service, "spec": {**service["spec"], "ipFamilies": ["IPv6"]}}
        applied = writer.apply(ipv6)
        assert address_type(applied) == "IPv6"
        cluster_ip = applied["spec"]["clusterIP"]
        assert ":" in cluster_ip
        assert address_type(writer.apply(service)) == "IPv6"  # it keeps its family
        wanted["addressType"] = "IPv6"
        assert ensure_slice(writer, wanted) is True  # the IPv4 one replaced
        assert ensure_slice(writer, wanted) is False
        assert slice_of(api, namespace, name)["addressType"] == "IPv6"
    finally:
        writer.close()

    token = service_account_token(
        api, control_plane, namespace, "broker", endpoint_rules(spec, 1), tmp_path / "token"
    )
    master = endpoint(control_plane, namespace, name, token)
    eventually(lambda: claimable(master), 10, "the Role applies")
    claimed = master.claim(POD_V6, PORTS, 2, "orders-broker-0-0")
    assert claimed.addresses == {
        "broker": f"[{cluster_ip}]:10911",
        "grpc": f"[{cluster_ip}]:8081",
    }
    found = slice_of(api, namespace, name)
    assert [e["addresses"] for e in found["endpoints"]] == [["fd00:10:244::7"]]
    with pytest.raises(KubeApiError, match=r"holds IPv6 addresses, the pod's is 10\.244\.0\.7"):
        master.claim(POD_A, PORTS, 3, "orders-broker-0-1")
