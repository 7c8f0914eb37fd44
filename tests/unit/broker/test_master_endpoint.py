"""The EndpointSlice a master writes (:func:`slice_body`): only its own pod, the epoch it
claims for, and what the operator created kept (labels, version, address type)."""

from __future__ import annotations

from typing import Any

import pytest

from reconsume.broker.kube_api import KubeApiError
from reconsume.broker.master_endpoint import EPOCH, HOLDER, slice_body
from reconsume.message.address import HostAddress


def created(**changes: Any) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "orders-broker-0-master",
            "namespace": "shop",
            "resourceVersion": "41",
            "labels": {"kubernetes.io/service-name": "orders-broker-0-master"},
            "annotations": {EPOCH: "2", "note": "kept"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}],
        "ports": [],
        **changes,
    }


PORTS = {"broker": 10912, "grpc": 8082}


def ip(text: str) -> bytes:
    return HostAddress.parse(text).ip


def test_the_slice_names_the_master_alone_for_its_epoch() -> None:
    found = created()
    body = slice_body(found, ip("10.0.0.9:0"), PORTS, 5, "orders-broker-0-1")
    assert body["endpoints"] == [
        {
            "addresses": ["10.0.0.9"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
        }
    ]
    assert body["ports"] == [
        {"name": "broker", "port": 10912, "protocol": "TCP"},
        {"name": "grpc", "port": 8082, "protocol": "TCP"},
    ]
    metadata = body["metadata"]
    assert metadata["resourceVersion"] == "41"  # the update is a compare-and-swap
    assert metadata["labels"] == created()["metadata"]["labels"]
    assert metadata["annotations"] == {EPOCH: "5", HOLDER: "orders-broker-0-1", "note": "kept"}
    assert found == created()  # what was read is not changed


def test_an_address_of_the_other_family_is_refused() -> None:
    body = slice_body(created(addressType="IPv6"), ip("[fd00::9]:0"), PORTS, 1, "b")
    assert body["endpoints"][0]["addresses"] == ["fd00::9"]
    with pytest.raises(KubeApiError, match=r"holds IPv4 addresses, the pod's is fd00::9"):
        slice_body(created(), ip("[fd00::9]:0"), PORTS, 1, "b")
