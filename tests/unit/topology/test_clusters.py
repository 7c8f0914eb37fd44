"""The BrokerCluster spec both the operator and embedded mode run: its defaults are the CRD's,
and an external cluster names its RocketMQ cluster."""

from __future__ import annotations

from typing import Any

from reconsume.topology.clusters import DEFAULT_STORAGE_SIZE, cluster_spec

from ..crds.schema import defaulted, load_crds, root_schema

CRDS = load_crds()


def body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "orders"},
        "spec": spec,
    }


def test_the_defaults_are_the_crds() -> None:
    stored: dict[str, Any] = defaulted(root_schema(CRDS["BrokerCluster"]), body())
    assert cluster_spec(body()) == cluster_spec(stored)
    spec = cluster_spec(stored, "img")
    assert (spec.namespace, spec.image, spec.external, spec.rocketmq_cluster) == (
        "default", "img", False, "orders",
    )  # fmt: skip


def test_an_external_cluster_runs_nothing_and_names_its_rocketmq_cluster() -> None:
    spec = cluster_spec(body(external={"nameServer": "a:9876;b:9876", "clusterName": "C"}))
    assert (spec.external, spec.external_name_server, spec.rocketmq_cluster) == (
        True, "a:9876;b:9876", "C",
    )  # fmt: skip
    anywhere = cluster_spec(body(external={"nameServer": "a:9876"}))
    assert anywhere.rocketmq_cluster is None  # every cluster its name servers know


def test_storage_and_name_server_resources_are_defaulted_by_the_code() -> None:
    """Neither has a default in the CRD (an external cluster uses neither)."""
    stored: dict[str, Any] = defaulted(root_schema(CRDS["BrokerCluster"]), body())
    assert "storage" not in stored["spec"]
    spec = cluster_spec(stored)
    assert (spec.storage_size, spec.storage_class) == (DEFAULT_STORAGE_SIZE, None)
    assert spec.name_server_resources is None
    size = root_schema(CRDS["BrokerCluster"])["properties"]["spec"]["properties"]["storage"]
    assert size["properties"]["size"]["default"] == DEFAULT_STORAGE_SIZE
    given = cluster_spec(body(storage={"size": "5Gi", "storageClassName": "fast"}))
    assert (given.storage_size, given.storage_class) == ("5Gi", "fast")
    chosen = {"requests": {"cpu": "10m"}}
    assert cluster_spec(body(nameServerResources=chosen)).name_server_resources == chosen
