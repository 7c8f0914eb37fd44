"""The objects of a BrokerCluster with replicas: a StatefulSet per replica whose pods join their
broker's election, the Leases and the right to use them, a disruption budget per broker."""

from __future__ import annotations

from typing import Any

from reconsume.topology.clusters import cluster_spec
from reconsume_operator.broker_pods import leases
from reconsume_operator.children import children
from reconsume_operator.master_services import master_slices
from reconsume_operator.naming import POD_INDEX_LABEL, REPLICA_LABEL, pod_name

from .test_children import by_kind, resource


def replicated(**spec: Any) -> list[dict[str, Any]]:
    return children(cluster_spec(resource(replicas=3, brokers=2, **spec), "img:1"))


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_each_replica_has_a_statefulset_and_each_broker_a_budget() -> None:
    objects = by_kind(replicated())
    sets = {name for kind, name in objects if kind == "StatefulSet"}
    assert sets == {"orders-broker", "orders-broker-r1", "orders-broker-r2"}
    budgets = {name for kind, name in objects if kind == "PodDisruptionBudget"}
    assert budgets == {"orders-broker-0", "orders-broker-1"}
    budget = objects[("PodDisruptionBudget", "orders-broker-1")]["spec"]
    assert budget["maxUnavailable"] == 1
    assert budget["selector"]["matchLabels"][POD_INDEX_LABEL] == "1"
    assert pod_name("orders", 1, 2) == "orders-broker-r2-1"


def test_replica_pods_elect_their_broker_master_through_its_lease() -> None:
    objects = by_kind(replicated(replication="Async"))
    for replica, name in enumerate(["orders-broker", "orders-broker-r1", "orders-broker-r2"]):
        sts = objects[("StatefulSet", name)]["spec"]
        pod = sts["template"]["spec"]
        (container,) = pod["containers"]
        args = container["args"]
        assert flag(args, "--broker-name") == "$(BROKER_NAME)"
        assert flag(args, "--broker-id") == str(replica)
        assert flag(args, "--election") == "kube:$(BROKER_NAME)"
        assert flag(args, "--replication") == "Async"
        assert flag(args, "--replicas") == "3"
        assert flag(args, "--master-service") == "$(BROKER_NAME)-master"
        assert (flag(args, "--master-port"), flag(args, "--master-grpc-port")) == ("10912", "8082")
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert (ports["master"], ports["grpc-master"]) == (10912, 8082)
        env = {e["name"]: e for e in container["env"]}
        assert env["BROKER_NAME"]["value"] == "orders-broker-$(BROKER_INDEX)"
        index = env["BROKER_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert index == f"metadata.labels['{POD_INDEX_LABEL}']"
        assert pod["serviceAccountName"] == "orders-broker"
        assert sts["updateStrategy"] == {"type": "OnDelete"}
        assert sts["template"]["metadata"]["labels"][REPLICA_LABEL] == str(replica)
        assert sts["serviceName"] == "orders-broker"
        selector = sts["selector"]["matchLabels"]
        assert selector.items() <= sts["template"]["metadata"]["labels"].items()
        # The first StatefulSet keeps the selector it was created with.
        assert (REPLICA_LABEL in selector) == (replica > 0)


def test_the_brokers_may_only_get_and_update_their_own_leases_and_master_endpoints() -> None:
    objects = by_kind(replicated())
    rule, services, slices = objects[("Role", "orders-broker-leases")]["rules"]
    assert rule["resources"] == ["leases"]
    assert rule["verbs"] == ["get", "update"]
    assert rule["resourceNames"] == ["orders-broker-0", "orders-broker-1"]
    masters = ["orders-broker-0-master", "orders-broker-1-master"]
    assert services == {
        "apiGroups": [""],
        "resources": ["services"],
        "resourceNames": masters,
        "verbs": ["get"],
    }
    assert slices == {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "resourceNames": masters,
        "verbs": ["get", "update"],
    }
    binding = objects[("RoleBinding", "orders-broker-leases")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "orders-broker", "namespace": "shop"}
    ]
    assert ("ServiceAccount", "orders-broker") in objects
    placeholders = leases(cluster_spec(resource(replicas=2, brokers=2), "img:1"), 2)
    assert [lease["metadata"]["name"] for lease in placeholders] == [
        "orders-broker-0",
        "orders-broker-1",
    ]
    assert all("spec" not in lease for lease in placeholders)


def test_replica_statefulsets_can_be_held_at_no_pods() -> None:
    spec = cluster_spec(resource(replicas=2, brokers=3), "img:1")
    objects = by_kind(children(spec, None, 0))
    assert objects[("StatefulSet", "orders-broker")]["spec"]["replicas"] == 3
    assert objects[("StatefulSet", "orders-broker-r1")]["spec"]["replicas"] == 0


def test_one_replica_keeps_the_objects_of_a_cluster_without_replicas() -> None:
    plain = children(cluster_spec(resource(), "img:1"))
    one = children(cluster_spec(resource(replicas=1, replication="Async"), "img:1"))
    assert plain == one
    sts = by_kind(plain)[("StatefulSet", "orders-broker")]["spec"]
    assert "updateStrategy" not in sts
    assert "--election" not in sts["template"]["spec"]["containers"][0]["args"]
    assert leases(cluster_spec(resource(), "img:1"), 2) == []
    assert master_slices(cluster_spec(resource(), "img:1"), 2) == []


def test_each_broker_has_a_master_service_whose_slice_the_brokers_write() -> None:
    """A Service without a selector per broker (kube-proxy routes it by the slice alone) and
    its slice, empty, tied to it by the label kube-proxy reads, marked as not the EndpointSlice
    controller's."""
    objects = by_kind(replicated())
    services = {name for kind, name in objects if kind == "Service" and name.endswith("-master")}
    assert services == {"orders-broker-0-master", "orders-broker-1-master"}
    service = objects[("Service", "orders-broker-1-master")]
    assert "selector" not in service["spec"]
    assert service["spec"]["ports"] == [
        {"name": "broker", "port": 10911, "protocol": "TCP"},
        {"name": "grpc", "port": 8081, "protocol": "TCP"},
    ]
    assert service["metadata"]["labels"]["app.kubernetes.io/instance"] == "orders"
    slices = master_slices(cluster_spec(resource(replicas=2, brokers=2), "img:1"), 2)
    assert [s["metadata"]["name"] for s in slices] == sorted(services)
    labels = slices[1]["metadata"]["labels"]
    assert labels["kubernetes.io/service-name"] == "orders-broker-1-master"
    assert labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io"
    assert labels["app.kubernetes.io/managed-by"] == "reconsume-operator"  # pruned by it
    assert slices[1]["endpoints"] == []
    # the master ports: only the master listens there
    assert slices[1]["ports"] == [
        {"name": "broker", "port": 10912, "protocol": "TCP"},
        {"name": "grpc", "port": 8082, "protocol": "TCP"},
    ]
