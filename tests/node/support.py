"""What the node tier's tests share: reading reconsume's resources and Prometheus metrics,
waiting for conditions, and the address of a cluster's name server as the machine reaches it
(its Service's cluster IP, routed into the node's network namespace)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from tests.chart.helm import CHART
from tests.polling import eventually

from .node import Node

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RELEASE, RELEASE_NAMESPACE = "reconsume", "reconsume-system"
DEMO_NAMESPACE = "reconsume-demo"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
"""Namespaces the tests use enforce the restricted Pod Security profile: every pod of the
chart and of the operator must pass its admission."""


def chart_app_version() -> str:
    for line in (CHART / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise AssertionError("Chart.yaml has no appVersion")


def wait_for(
    probe: Callable[[], T | None], timeout_s: float, what: str, node: Node | None = None
) -> T:
    """Poll ``probe`` until it returns something truthy; on timeout, the failure says what
    was awaited and, with ``node``, what the cluster's pods and events looked like."""
    return eventually(
        probe,
        timeout_s,
        what,
        interval_s=0.5,
        detail=lambda: "" if node is None else describe(node),
    )


def describe(node: Node) -> str:
    pods = node.kubectl("get", "pods,pvc,reconsume", "-A", "-o", "wide", check=False).stdout
    events = node.kubectl(
        "get", "events", "-A", "--sort-by=.lastTimestamp", check=False
    ).stdout.splitlines()[-25:]
    logs = []
    for pod in items(node, "pods", RELEASE_NAMESPACE) if namespace_exists(node) else []:
        name = pod["metadata"]["name"]
        text = node.kubectl("-n", RELEASE_NAMESPACE, "logs", name, check=False).stdout
        lines = [line for line in text.splitlines() if "GET /healthz" not in line]
        logs.append(f"operator {name}:\n" + "\n".join(lines[-30:]))
    return f"{pods}\nlast events:\n" + "\n".join(events) + "\n\n" + "\n\n".join(logs)


def namespace_exists(node: Node, namespace: str = RELEASE_NAMESPACE) -> bool:
    return get(node, "namespace", namespace) is not None


def get(node: Node, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
    if namespace:
        args += ["-n", namespace]
    out = node.kubectl(*args).stdout
    return json.loads(out) if out.strip() else None


def items(node: Node, kind: str, namespace: str | None = None, selector: str = "") -> list[Any]:
    args = ["get", kind, "-o", "json"]
    args += ["-n", namespace] if namespace else ["-A"]
    if selector:
        args += ["-l", selector]
    found: list[Any] = json.loads(node.kubectl(*args).stdout)["items"]
    return found


def condition(obj: dict[str, Any] | None, kind: str = "Ready") -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            found: dict[str, Any] = entry
            return found
    return {}


def ready(obj: dict[str, Any] | None) -> bool:
    """Ready=True for the object's current generation."""
    entry = condition(obj)
    return (
        obj is not None
        and entry.get("status") == "True"
        and entry.get("observedGeneration") == obj["metadata"].get("generation")
    )


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def name_server(node: Node, namespace: str, cluster: str) -> str:
    service = get(node, "service", f"{cluster}-namesrv", namespace)
    assert service is not None, f"no name-server Service of {namespace}/{cluster}"
    return f"{service['spec']['clusterIP']}:9876"


def metrics(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A broker's ``/metrics`` (``address`` ``ip:8080``): sample name and sorted labels to
    value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric_sum(addresses: list[str], name: str, **labels: str) -> float:
    total = 0.0
    for address in addresses:
        for (sample, sample_labels), value in metrics(address).items():
            if sample == name and labels.items() <= dict(sample_labels).items():
                total += value
    return total


def broker_http_addresses(node: Node, namespace: str, cluster: str) -> list[str]:
    pods = items(
        node,
        "pods",
        namespace,
        f"app.kubernetes.io/instance={cluster},app.kubernetes.io/component=broker",
    )
    return [f"{pod['status']['podIP']}:8080" for pod in pods if pod_ready(pod)]


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def create_namespace(node: Node, name: str) -> None:
    node.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": RESTRICTED},
            }
        ]
    )


def save_logs(node: Node, label: str) -> Path:
    """Every container log of the tests' namespaces, kept under the node's directory (pod
    logs vanish with their pods): ``saved-logs/<label>/<namespace>_<pod>.log``."""
    directory = node.layout.root / "saved-logs" / label
    directory.mkdir(parents=True, exist_ok=True)
    for namespace in (RELEASE_NAMESPACE, DEMO_NAMESPACE):
        if not namespace_exists(node, namespace):
            continue
        for pod in items(node, "pods", namespace):
            name = pod["metadata"]["name"]
            logs = node.kubectl(
                "-n", namespace, "logs", name, "--all-containers", "--timestamps", check=False
            )
            (directory / f"{namespace}_{name}.log").write_text(logs.stdout + logs.stderr)
    return directory
