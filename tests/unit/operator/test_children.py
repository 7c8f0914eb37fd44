"""The objects a BrokerCluster runs, built from its resource: names, selectors, probes, the
broker settings file (read back by the broker's own config loader) and owner references."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import kopf
import pytest

from reconsume.broker.config_file import broker_settings
from reconsume.cli import broker_settings_of, build_parser
from reconsume.flags import given_settings
from reconsume.namesrv import NamesrvSettings
from reconsume.store.settings import FlushMode
from reconsume.topology.clusters import cluster_spec
from reconsume_operator.children import children
from reconsume_operator.naming import (
    BROKER_GRPC_PORT,
    BROKER_HTTP_PORT,
    CONFIG_DIR,
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    broker_names,
    name_server,
)

from ..crds.schema import defaulted, load_crds, root_schema

CRDS = load_crds()


def resource(**spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-1"},
        "spec": spec,
    }
    defaulted_body: dict[str, Any] = defaulted(root_schema(CRDS["BrokerCluster"]), body)
    return defaulted_body


def by_kind(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_an_operator_run_cluster_gets_every_child_in_its_namespace() -> None:
    objects = by_kind(children(cluster_spec(resource(), "img:1")))
    assert set(objects) == {
        ("ConfigMap", "orders-broker-config"),
        ("Service", "orders-namesrv"),
        ("Deployment", "orders-namesrv"),
        ("Service", "orders-broker"),
        ("Service", "orders-grpc"),
        ("StatefulSet", "orders-broker"),
        ("PodDisruptionBudget", "orders-broker"),
    }
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"shop"}
    grpc = objects["Service", "orders-grpc"]["spec"]
    assert "clusterIP" not in grpc  # balanced, unlike the brokers' headless Service
    assert grpc["ports"] == [{"name": "grpc", "port": 8081, "targetPort": "grpc"}]


def test_an_external_cluster_gets_no_children_and_uses_its_address() -> None:
    spec = cluster_spec(resource(external={"nameServer": "ns1:9876;ns2:9876"}), "img:1")
    assert children(spec) == []
    assert name_server(spec) == "ns1:9876;ns2:9876"
    assert spec.rocketmq_cluster is None


def test_the_name_server_address_is_the_service_dns_name() -> None:
    spec = cluster_spec(resource(), "img:1")
    assert name_server(spec) == "orders-namesrv.shop.svc:9876"
    assert spec.rocketmq_cluster == "orders"


def test_selectors_match_the_pod_templates() -> None:
    objects = children(cluster_spec(resource(), "img:1"))
    for obj in objects:
        spec = obj.get("spec") or {}
        selector = spec.get("selector")
        if obj["kind"] in ("Deployment", "StatefulSet"):
            labels = spec["template"]["metadata"]["labels"]
            assert selector["matchLabels"].items() <= labels.items()
        elif obj["kind"] == "Service":
            assert selector["app.kubernetes.io/instance"] == "orders"


def test_the_statefulset_follows_the_spec() -> None:
    body = resource(
        brokers=3,
        image="registry/reconsume:2",
        storage={"size": "20Gi", "storageClassName": "fast"},
        resources={"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi"}},
    )
    sts = by_kind(children(cluster_spec(body, "img:1")))[("StatefulSet", "orders-broker")]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "orders-broker"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry/reconsume:2"
    assert container["resources"] == {"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi"}}
    args = container["args"]
    assert args[0] == "broker"
    assert args[args.index("--config") + 1] == f"{CONFIG_DIR}/{CONFIG_FILE}"
    assert args[args.index("--namesrv") + 1] == "orders-namesrv.shop.svc:9876"
    assert args[args.index("--broker-name") + 1] == "$(POD_NAME)"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["config"] == CONFIG_DIR
    assert mounts["store"] == args[args.index("--store-dir") + 1]
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[probe["port"]] == BROKER_HTTP_PORT


def test_no_storage_class_means_the_cluster_default() -> None:
    sts = by_kind(children(cluster_spec(resource(), "img:1")))[("StatefulSet", "orders-broker")]
    assert "storageClassName" not in sts["spec"]["volumeClaimTemplates"][0]["spec"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "img:1"
    assert "resources" not in container


def test_the_broker_settings_file_is_what_the_broker_reads(tmp_path: Path) -> None:
    body = resource(delayLevels="1s 5s 2m", flush="Sync", retentionHours=24)
    config = by_kind(children(cluster_spec(body, "img:1")))[("ConfigMap", "orders-broker-config")]
    values = tomllib.loads(config["data"][CONFIG_FILE])
    settings = broker_settings(values, {"store_dir": str(tmp_path)})
    assert settings.delay_levels == "1s 5s 2m"
    assert settings.flush_mode is FlushMode.SYNC
    assert settings.store.retention_hours == 24
    assert settings.cluster_name == "orders"
    assert settings.http_address() == ("", BROKER_HTTP_PORT)  # every interface, both families
    assert settings.grpc_address() == ("", BROKER_GRPC_PORT)


@pytest.mark.parametrize(
    ("pod_ip", "advertised"),
    [("10.244.0.6", "10.244.0.6:10911"), ("fd00:10:244::6", "[fd00:10:244::6]:10911")],
)
def test_a_pod_of_either_family_listens_everywhere_and_advertises_its_address(
    tmp_path: Path, pod_ip: str, advertised: str
) -> None:
    """The broker's command line as the kubelet expands it, read by the broker's own parser:
    one port on every interface, the pod's address (IPv4 or IPv6) advertised."""
    objects = by_kind(children(cluster_spec(resource(), "img:1")))
    config = objects[("ConfigMap", "orders-broker-config")]["data"][CONFIG_FILE]
    (tmp_path / CONFIG_FILE).write_text(config)
    (container,) = objects[("StatefulSet", "orders-broker")]["spec"]["template"]["spec"][
        "containers"
    ]
    expansions = {"$(POD_IP)": pod_ip, "$(POD_NAME)": "orders-broker-0", CONFIG_DIR: str(tmp_path)}
    args = list(container["args"])
    for variable, value in expansions.items():
        args = [arg.replace(variable, value) for arg in args]
    assert not [arg for arg in args if "$(" in arg]
    settings = broker_settings_of(build_parser().parse_args(args))
    assert (settings.listen_host, settings.listen_port) == ("", 10911)
    assert str(settings.advertised(10911)) == advertised


def test_name_servers_listen_on_every_interface() -> None:
    objects = by_kind(children(cluster_spec(resource(), "img:1")))
    namesrv = objects[("Deployment", "orders-namesrv")]
    (container,) = namesrv["spec"]["template"]["spec"]["containers"]
    given = given_settings(NamesrvSettings, build_parser().parse_args(container["args"]))
    settings = NamesrvSettings(**given)
    assert (settings.listen_host, settings.listen_port) == ("", 9876)


def test_name_servers_and_the_disruption_budget() -> None:
    objects = by_kind(children(cluster_spec(resource(nameServers=3), "img:1")))
    assert objects[("Deployment", "orders-namesrv")]["spec"]["replicas"] == 3
    pdb = objects[("PodDisruptionBudget", "orders-broker")]
    assert pdb["spec"]["maxUnavailable"] == 1
    service = objects[("Service", "orders-broker")]
    assert service["spec"]["clusterIP"] == "None"


def test_adopting_sets_the_owner_reference() -> None:
    body = resource()
    objects = children(cluster_spec(body, "img:1"))
    kopf.adopt(objects, owner=kopf.Body(body))
    for obj in objects:
        (reference,) = obj["metadata"]["ownerReferences"]
        assert reference["kind"] == "BrokerCluster"
        assert reference["uid"] == "u-1"
        assert reference["controller"] is True


@pytest.mark.parametrize("count", [1, 2, 5])
def test_broker_names_are_the_pod_names(count: int) -> None:
    assert broker_names("orders", count) == [f"orders-broker-{n}" for n in range(count)]


def test_a_settings_change_rolls_the_brokers_and_nothing_else_does() -> None:
    def template(**spec: object) -> dict[str, object]:
        objects = by_kind(children(cluster_spec(resource(**spec), "img:1")))
        return objects[("StatefulSet", "orders-broker")]["spec"]["template"]

    base = template()
    annotation = base["metadata"]["annotations"][CONFIG_HASH_ANNOTATION]
    assert template()["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == annotation
    # The brokers read their settings file once: a change of it must change the pod template.
    for changed in ({"delayLevels": "1s 2s"}, {"flush": "Sync"}, {"retentionHours": 1}):
        assert template(**changed)["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] != annotation
    assert template(brokers=5)["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == annotation


def namesrv_container(**spec: object) -> dict[str, Any]:
    objects = by_kind(children(cluster_spec(resource(**spec), "img:1")))
    (container,) = objects[("Deployment", "orders-namesrv")]["spec"]["template"]["spec"][
        "containers"
    ]
    found: dict[str, Any] = container
    return found


def test_the_name_servers_request_resources_by_default() -> None:
    """A small process: a little CPU, a bounded memory (no CPU limit, so lookups are not
    throttled); no quota or LimitRange has to supply them."""
    assert namesrv_container()["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"memory": "256Mi"},
    }


def test_name_server_resources_follow_the_spec() -> None:
    chosen = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}
    assert namesrv_container(nameServerResources=chosen)["resources"] == chosen
    # The brokers' resources are their own.
    body = resource(nameServerResources=chosen, resources={"requests": {"cpu": "2"}})
    sts = by_kind(children(cluster_spec(body, "img:1")))[("StatefulSet", "orders-broker")]
    assert sts["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "2"}
    }
    # {} asks for none (a namespace whose LimitRange sets them, say).
    assert "resources" not in namesrv_container(nameServerResources={})


def test_default_name_server_resources_are_not_shared_between_clusters() -> None:
    first = namesrv_container()
    first["resources"]["requests"]["cpu"] = "9"
    assert namesrv_container()["resources"]["requests"]["cpu"] == "50m"


def test_without_storage_each_broker_gets_the_default_volume() -> None:
    """spec.storage has no default in the CRD (an external cluster would show it): absent, the
    claim is the default size in the cluster's default class."""
    assert "storage" not in resource()["spec"]
    sts = by_kind(children(cluster_spec(resource(), "img:1")))[("StatefulSet", "orders-broker")]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"]
    given = by_kind(children(cluster_spec(resource(storage={}), "img:1")))
    claims = given[("StatefulSet", "orders-broker")]["spec"]["volumeClaimTemplates"]
    assert claims == sts["spec"]["volumeClaimTemplates"]
