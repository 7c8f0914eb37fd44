"""The Helm chart ``charts/reconsume``, rendered by a real helm over a matrix of values
(``tests/chart/values/*.yaml``, each with and without prometheus-operator's API): lint, what
each setting renders, least-privilege RBAC, the CRDs identical to ``crds/``, and invalid
values refused by ``values.schema.json`` with a message naming the value. The rendered chart
is applied to a real API server in ``tests/k8s/test_chart_install.py``."""

from __future__ import annotations

import filecmp
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconsume_operator.config import OperatorConfig
from reconsume_operator.dead_letter_jobs import RBAC_RESOURCES, RBAC_VERBS
from reconsume_operator.main import build_parser
from reconsume_operator.naming import labels
from reconsume_operator.network_policy import RBAC_VERBS as NETWORK_POLICY_VERBS

from .helm import (
    CHART,
    MONITORING_APIS,
    NAMESPACE,
    REPO,
    Helm,
    HelmError,
    by_kind,
    one,
    values_files,
)

MATRIX = [
    pytest.param(path, apis, id=f"{path.stem}-{'monitoring' if apis else 'plain'}")
    for path in values_files()
    for apis in ((), MONITORING_APIS)
]


def load_values(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = one(objects, "Deployment")
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    return found  # type: ignore[no-any-return]


def env_of(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container(objects)["env"]}


# ------------------------------------------------------------------ lint and the matrix
def test_the_matrix_covers_every_mode() -> None:
    names = {path.stem for path in values_files()}
    assert {"default", "namespaced", "standalone", "locked-down", "monitoring"} <= names


@pytest.mark.parametrize("path", values_files(), ids=lambda path: path.stem)
def test_helm_lint_strict(helm: Helm, path: Path) -> None:
    output = helm.run("lint", "--strict", str(CHART), "--values", str(path))
    assert "0 chart(s) failed" in output, output


@pytest.mark.parametrize(("path", "apis"), MATRIX)
def test_every_object_is_labelled_and_placed(helm: Helm, path: Path, apis: tuple[str, ...]) -> None:
    objects = helm.render(values=[path], api_versions=apis)
    watched = load_values(path).get("watchNamespaces") or []
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering"}
    for obj in objects:
        metadata = obj["metadata"]
        what = f"{obj['kind']} {metadata['name']}"
        labels = metadata.get("labels", {})
        assert labels.get("app.kubernetes.io/instance") == "reconsume", what
        assert labels.get("app.kubernetes.io/managed-by") == "Helm", what
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in metadata, what
        elif obj["kind"] in {"Role", "RoleBinding", "KopfPeering"}:
            assert metadata["namespace"] in watched, what
        else:
            assert metadata["namespace"] == NAMESPACE, what
    names = [
        (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) for obj in objects
    ]
    assert len(names) == len(set(names)), "an object rendered twice"


@pytest.mark.parametrize(("path", "apis"), MATRIX)
def test_monitoring_objects_only_where_their_api_exists(
    helm: Helm, path: Path, apis: tuple[str, ...]
) -> None:
    kinds = {obj["kind"] for obj in helm.render(values=[path], api_versions=apis)}
    monitors = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert kinds & monitors == (monitors if apis else set())


# ------------------------------------------------------------------ the operator's Deployment
def test_defaults_two_replicas_with_peering_cluster_wide(helm: Helm) -> None:
    objects = helm.render()
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    args = container(objects)["args"]
    assert "--all-namespaces" in args
    assert {"--peering=reconsume", "--peering-lifetime=60", "--priority=random"} <= set(args)
    assert "--standalone" not in args
    peering = one(objects, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == "reconsume"
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    env = env_of(objects)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert env["RECONSUME_BROKER_IMAGE"] == f"ghcr.io/reconsume/reconsume:{chart['appVersion']}"
    assert env["RECONSUME_DLQ_JOBS_IMAGE"] == f"ghcr.io/reconsume/dlq-jobs:{chart['appVersion']}"
    assert container(objects)["image"] == f"ghcr.io/reconsume/operator:{chart['appVersion']}"


def test_restricted_security_defaults(helm: Helm) -> None:
    objects = helm.render()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    security = container(objects)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    # A read-only root needs a writable /tmp (HOME of the image's user).
    mounts = {mount["mountPath"]: mount["name"] for mount in container(objects)["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    resources = container(objects)["resources"]
    assert resources["requests"]["cpu"]
    assert resources["requests"]["memory"]
    assert resources["limits"]["memory"]
    probes = container(objects)
    assert probes["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    # No Service environment variables: the Service <fullname>-metrics would otherwise give
    # the operator RECONSUME_METRICS_PORT=tcp://..., which it reads as its own setting (on a
    # node, the operator crash-looped on it).
    assert pod["enableServiceLinks"] is False


def test_namespaced_watch(helm: Helm) -> None:
    objects = helm.render(values=[REPO / "tests/chart/values/namespaced.yaml"])
    args = container(objects)["args"]
    assert [arg for arg in args if arg.startswith("--namespace")] == [
        "--namespace=shop",
        "--namespace=billing",
    ]
    assert "--all-namespaces" not in args
    assert "--verbose" in args
    assert "--drift-seconds=30" in args
    peerings = by_kind(objects, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["billing", "shop"]
    assert by_kind(objects, "ClusterKopfPeering") == []
    sa = one(objects, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/reconsume"
    }


def test_standalone_single_replica(helm: Helm) -> None:
    objects = helm.render(values=[REPO / "tests/chart/values/standalone.yaml"])
    assert one(objects, "Deployment")["spec"]["replicas"] == 1
    args = container(objects)["args"]
    assert "--standalone" in args
    assert not [arg for arg in args if arg.startswith(("--peering", "--priority"))]
    assert by_kind(objects, "PodDisruptionBudget") == []
    assert by_kind(objects, "ClusterKopfPeering") + by_kind(objects, "KopfPeering") == []
    assert container(objects)["image"] == (
        "registry.example.com/mirror/reconsume-operator@sha256:"
        "4b5c7d8e9f00112233445566778899aabbccddeeff00112233445566778899aa"
    )
    env = env_of(objects)
    assert env["RECONSUME_BROKER_IMAGE"] == "registry.example.com/mirror/reconsume:0.1.0-patched"
    assert env["RECONSUME_NAMESERVER_ADDRESS_TEMPLATE"] == (
        "{cluster}-namesrv.{namespace}.svc.cluster.local:9876"
    )
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "mirror-credentials"}]


def test_several_replicas_without_peering_are_refused(helm: Helm) -> None:
    with pytest.raises(HelmError, match=r"replicaCount: more than one replica needs peering"):
        helm.render(sets=["peering.enabled=false"])


def test_without_peering_pods_are_replaced_not_rolled(helm: Helm) -> None:
    objects = helm.render(values=[REPO / "tests/chart/values/standalone.yaml"])
    assert one(objects, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert "strategy" not in one(helm.render(), "Deployment")["spec"]


def test_spark_operator_rights_need_spark_on_kubernetes(helm: Helm) -> None:
    with pytest.raises(HelmError, match=r"rbac.sparkOperator needs rbac.sparkOnKubernetes"):
        helm.render(sets=["rbac.sparkOnKubernetes=false"])


def test_large_numbers_render_as_integers(helm: Helm, tmp_path: Path) -> None:
    """Numbers of a values file reach templates as floats (1000000 would print 1e+06)."""
    values = tmp_path / "values.yaml"
    values.write_text("peering: {lifetimeSeconds: 1000000}\noperator: {metricsPort: 10090}\n")
    objects = helm.render(values=[values])
    args = container(objects)["args"]
    assert "--peering-lifetime=1000000" in args
    assert "--metrics-port=10090" in args
    assert one(objects, "Service")["spec"]["ports"][0]["port"] == 10090


def test_operator_flags_exist(helm: Helm) -> None:
    """Every flag the Deployment passes is one the operator's parser takes."""
    for path in values_files():
        args = container(helm.render(values=[path]))["args"]
        parsed = build_parser("reconsume-operator").parse_args(args)
        assert parsed.metrics_port == 9090
        if "--priority=random" in args:
            assert parsed.priority >= 1


# ------------------------------------------------------------------ RBAC
def rules_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [rule for obj in by_kind(objects, kind) for rule in obj.get("rules", [])]


def grants(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        for rule in rules
    )


SECRET_VERBS = {"get", "create", "patch"}
"""Access control: Users' generated key Secrets, admin Secrets and the rendered ACL Secrets."""


@pytest.mark.parametrize("path", values_files(), ids=lambda path: path.stem)
def test_rbac_has_no_wildcards_and_secrets_only_in_their_rule(helm: Helm, path: Path) -> None:
    objects = helm.render(values=[path])
    for kind in ("ClusterRole", "Role"):
        for rule in rules_of(objects, kind):
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], f"{kind} rule {rule}"
            if "secrets" in rule["resources"]:
                assert rule["apiGroups"] == [""], rule
                assert rule["resources"] == ["secrets"], rule
                assert set(rule["verbs"]) == SECRET_VERBS, rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            assert "nonResourceURLs" not in rule
        if kind == "ClusterRole":
            continue
        for role in by_kind(objects, kind):
            assert sum("secrets" in rule["resources"] for rule in role["rules"]) == 1, role


def test_rbac_covers_users_and_access_control(helm: Helm) -> None:
    """Users are watched and patched like the other kinds, their Secrets owned (owner
    references that block deletion need the finalizers subresource), and broker pods are
    annotated so that the kubelet refreshes their mounted Secrets."""
    for values in ([], [REPO / "tests/chart/values/locked-down.yaml"]):
        objects = helm.render(values=values)
        rules = [r for kind in ("ClusterRole", "Role") for r in rules_of(objects, kind)]
        for verb in ("get", "list", "watch", "patch"):
            assert grants(rules, "reconsume.io", "users", verb), verb
        assert grants(rules, "reconsume.io", "users/status", "patch")
        assert grants(rules, "reconsume.io", "users/finalizers", "update")
        assert not grants(rules, "reconsume.io", "users", "delete")
        for verb in SECRET_VERBS:
            assert grants(rules, "", "secrets", verb), verb
        assert grants(rules, "", "pods", "patch")


def test_rbac_cluster_wide(helm: Helm) -> None:
    objects = helm.render()
    assert by_kind(objects, "Role") == []
    assert by_kind(objects, "RoleBinding") == []
    rules = rules_of(objects, "ClusterRole")
    assert grants(rules, "reconsume.io", "consumergroups", "watch")
    assert grants(rules, "reconsume.io", "deadletterjobs/status", "patch")
    assert grants(rules, "", "namespaces", "watch")
    assert grants(rules, "kopf.dev", "clusterkopfpeerings", "patch")
    # The chart creates the peering object: the operator need not.
    assert not grants(rules, "kopf.dev", "clusterkopfpeerings", "create")
    assert not grants(rules, "reconsume.io", "consumergroups", "delete")
    binding = one(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "reconsume", "namespace": NAMESPACE}
    ]


def test_rbac_per_namespace(helm: Helm) -> None:
    objects = helm.render(values=[REPO / "tests/chart/values/namespaced.yaml"])
    cluster_rules = rules_of(objects, "ClusterRole")
    # Cluster-wide only what has no namespace, read only.
    assert {r for rule in cluster_rules for r in rule["resources"]} == {"customresourcedefinitions"}
    assert {v for rule in cluster_rules for v in rule["verbs"]} == {"get", "list", "watch"}
    roles = by_kind(objects, "Role")
    assert sorted(role["metadata"]["namespace"] for role in roles) == ["billing", "shop"]
    for role in roles:
        assert grants(role["rules"], "reconsume.io", "brokerclusters", "watch")
        assert grants(role["rules"], "kopf.dev", "kopfpeerings", "patch")
    bindings = by_kind(objects, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["billing", "shop"]
    assert all(b["roleRef"]["kind"] == "Role" for b in bindings)


def test_rbac_without_spark_on_kubernetes(helm: Helm) -> None:
    objects = helm.render(values=[REPO / "tests/chart/values/locked-down.yaml"])
    rules = rules_of(objects, "Role")
    # Roles and ServiceAccounts only for replicated brokers: their Leases, nothing more.
    assert grants(rules, "rbac.authorization.k8s.io", "roles", "create")
    for verb in ("get", "update", "watch"):  # watch: the status follows the Leases
        assert grants(rules, "coordination.k8s.io", "leases", verb)
    assert not grants(rules, "", "persistentvolumeclaims", "create")
    assert not grants(rules, "sparkoperator.k8s.io", "sparkapplications", "create")
    assert grants(rules, "", "pods", "get")
    assert not grants(rules, "", "pods", "create")
    assert grants(rules, "batch", "jobs", "create")
    assert by_kind(objects, "ServiceAccount") == []
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "reconsume-operator-sa"
    assert one(objects, "RoleBinding")["subjects"][0]["name"] == "reconsume-operator-sa"


def test_rbac_grants_what_a_spark_driver_role_grants(helm: Helm) -> None:
    """Kubernetes lets the operator create a k8s:// DeadLetterJob's Role only if it holds
    every permission of that Role itself."""
    rules = rules_of(helm.render(), "ClusterRole")
    for resource in RBAC_RESOURCES:
        for verb in RBAC_VERBS:
            assert grants(rules, "", resource, verb), f"{verb} {resource}"


@pytest.mark.parametrize("path", values_files(), ids=lambda path: path.stem)
def test_rbac_on_network_policies_is_what_the_operator_does(helm: Helm, path: Path) -> None:
    """A BrokerCluster's NetworkPolicy is server-side applied and pruned: no get, no watch
    (tests/k8s/test_operator_network_policy.py runs the operator's writer with just these)."""
    objects = helm.render(values=[path])
    rules = [r for kind in ("ClusterRole", "Role") for r in rules_of(objects, kind)]
    granting = [rule for rule in rules if "networkpolicies" in rule["resources"]]
    assert granting, "no rule on networkpolicies"
    for rule in granting:
        assert rule["apiGroups"] == ["networking.k8s.io"], rule
        assert rule["resources"] == ["networkpolicies"], rule
        assert rule["verbs"] == list(NETWORK_POLICY_VERBS), rule


@pytest.mark.parametrize("path", values_files(), ids=lambda path: path.stem)
def test_the_operator_is_told_its_own_pods(helm: Helm, path: Path) -> None:
    """What BrokerClusters' NetworkPolicies admit the operator by: its namespace and the
    labels of the Deployment's selector, read as the operator reads its settings."""
    objects = helm.render(values=[path])
    config = OperatorConfig.from_env(env_of(objects))
    assert config.pod_namespace == NAMESPACE
    deployment = one(objects, "Deployment")["spec"]
    assert dict(config.pod_labels) == deployment["selector"]["matchLabels"]
    assert dict(config.pod_labels).items() <= deployment["template"]["metadata"]["labels"].items()


# ------------------------------------------------------------------ NetworkPolicy
def test_network_policy(helm: Helm) -> None:
    assert by_kind(helm.render(), "NetworkPolicy") == []
    objects = helm.render(values=[REPO / "tests/chart/values/locked-down.yaml"])
    policy = one(objects, "NetworkPolicy")["spec"]
    assert policy["podSelector"] == one(objects, "Deployment")["spec"]["selector"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert ingress["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    ports = [port["port"] for rule in policy["egress"] for port in rule.get("ports", [])]
    assert {53, 443, 6443, 9876, 10911, 19876} == set(ports)
    api_rule = next(
        rule for rule in policy["egress"] if {"port": 6443, "protocol": "TCP"} in rule["ports"]
    )
    assert [peer["ipBlock"]["cidr"] for peer in api_rule["to"]] == ["10.96.0.1/32", "172.18.0.2/32"]


# ------------------------------------------------------------------ monitoring
def test_monitors_select_operator_and_brokers(helm: Helm) -> None:
    objects = helm.render(api_versions=MONITORING_APIS)
    service = one(objects, "Service")
    monitor = one(objects, "ServiceMonitor")["spec"]
    assert monitor["selector"]["matchLabels"] == service["spec"]["selector"]
    assert monitor["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"
    assert {"action": "replace", "targetLabel": "job", "replacement": "reconsume-operator"} in (
        monitor["endpoints"][0]["relabelings"]
    )
    pods = one(objects, "PodMonitor")["spec"]
    assert pods["namespaceSelector"] == {"any": True}
    endpoint = pods["podMetricsEndpoints"][0]
    assert endpoint["port"] == "http"
    assert endpoint["path"] == "/metrics"
    targets = {relabel["targetLabel"] for relabel in endpoint["relabelings"]}
    assert {"job", "reconsume_cluster"} <= targets


def test_broker_pod_monitor_matches_the_brokers_the_operator_runs(helm: Helm) -> None:
    objects = helm.render(api_versions=MONITORING_APIS)
    selector = one(objects, "PodMonitor")["spec"]["selector"]["matchLabels"]
    broker_labels = labels("orders", "broker")
    assert selector.items() <= broker_labels.items()
    assert not selector.items() <= labels("orders", "namesrv").items()


def test_pod_monitor_watches_the_watched_namespaces(helm: Helm) -> None:
    objects = helm.render(
        values=[REPO / "tests/chart/values/namespaced.yaml"], api_versions=MONITORING_APIS
    )
    assert one(objects, "PodMonitor")["spec"]["namespaceSelector"] == {
        "matchNames": ["shop", "billing"]
    }


def test_monitor_labels_and_rules_config_map(helm: Helm) -> None:
    objects = helm.render(
        values=[REPO / "tests/chart/values/monitoring.yaml"], api_versions=MONITORING_APIS
    )
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        assert one(objects, kind)["metadata"]["labels"]["release"] == "prometheus"
    rule = one(objects, "PrometheusRule")["spec"]
    config_map = one(objects, "ConfigMap")
    assert yaml.safe_load(config_map["data"]["reconsume.rules.yaml"]) == rule


# ------------------------------------------------------------------ CRDs
def test_chart_crds_are_identical_to_crds() -> None:
    source = sorted(p.relative_to(REPO / "crds") for p in (REPO / "crds").rglob("*.yaml"))
    packaged = sorted(p.relative_to(CHART / "crds") for p in (CHART / "crds").rglob("*.yaml"))
    assert packaged == source, "charts/reconsume/crds must hold exactly the files of crds/"
    for relative in source:
        assert filecmp.cmp(REPO / "crds" / relative, CHART / "crds" / relative, shallow=False), (
            f"charts/reconsume/crds/{relative} differs from crds/{relative}: "
            "cp crds/*.yaml charts/reconsume/crds/ && cp crds/kopf/peering.yaml "
            "charts/reconsume/crds/kopf/"
        )


def test_helm_installs_exactly_the_crds(helm: Helm) -> None:
    shown = by_kind(helm.render(extra=["--include-crds"]), "CustomResourceDefinition")
    expected = [
        doc
        for path in sorted((REPO / "crds").rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc
    ]
    key = lambda doc: doc["metadata"]["name"]  # noqa: E731
    assert sorted(shown, key=key) == sorted(expected, key=key)
    names = {doc["spec"]["names"]["kind"] for doc in shown}
    assert {"BrokerCluster", "ConsumerGroup", "Topic", "DeadLetterJob"} <= names
    assert {"KopfPeering", "ClusterKopfPeering"} <= names


# ------------------------------------------------------------------ the values schema
@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("replicaCount=two", "at '/replicaCount': got string, want integer"),
        ("replicaCount=0", "at '/replicaCount': minimum: got 0, want 1"),
        ("watchNamespaces={Shop_NS}", "at '/watchNamespaces/0': 'Shop_NS' does not match pattern"),
        ("alerts.deadLetterBacklog.max=-5", "at '/alerts/deadLetterBacklog/max': minimum: got -5"),
        (
            "alerts.retryStorm.window=ten minutes",
            "at '/alerts/retryStorm/window': 'ten minutes' does not match pattern",
        ),
        (
            "alerts.brokerDown.severity=page",
            "at '/alerts/brokerDown/severity': value must be one of",
        ),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"),
        ("replicas=2", "additional properties 'replicas' not allowed"),
        ("networkPolicy.brokerPorts={70000}", "at '/networkPolicy/brokerPorts/0': maximum"),
        ("peering.lifetimeSeconds=0", "at '/peering/lifetimeSeconds': minimum: got 0, want 1"),
        ("monitoring.podMonitor.scrape=true", "additional properties 'scrape' not allowed"),
    ],
)
def test_invalid_values_are_refused_naming_the_value(
    helm: Helm, assignment: str, expected: str
) -> None:
    with pytest.raises(HelmError) as refused:
        helm.render(sets=[assignment])
    message = str(refused.value)
    assert "values don't meet the specifications of the schema" in message, message
    assert expected in message, message


def test_schema_covers_every_default_value() -> None:
    """values.yaml and the schema agree: every key of the defaults is in the schema (which
    refuses unknown keys) and the schema requires nothing the defaults lack."""
    schema = yaml.safe_load((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = load_values(CHART / "values.yaml")

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if not isinstance(value, dict) or node.get("type") != "object":
            return
        properties = node.get("properties")
        if properties is None:
            return
        for key in node.get("required", []):
            assert key in value, f"{path}{key} is required by the schema but has no default"
        for key, child in value.items():
            assert key in properties, f"{path}{key} is not in values.schema.json"
            walk(child, properties[key], f"{path}{key}.")

    walk(values, schema, "")
