"""What the node tier's tests install and run on the node, each made sure of by the fixture
that needs it (so any test runs alone, and in any order):

- :class:`Installation`: the chart installed with helm (two operator replicas, peering) in a
  namespace enforcing the restricted Pod Security profile, and ``examples/`` applied with
  kubectl in another (the BrokerCluster ``orders``: a name server and two brokers);
- :func:`retry_group`: a Topic and a ConsumerGroup of the test's own, through which Apache
  RocketMQ's Java client drives messages into the dead-letter queue;
and reading them back: status, metrics, Job pods' termination messages, broker addresses.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.wire.signing import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials

from ..chart.helm import CHART, Helm
from ..compat.conftest import JavaClient
from ..compat.java_client_support import run_driver_at
from .node import Node
from .support import (
    DEMO_NAMESPACE,
    EXAMPLES,
    RELEASE,
    RELEASE_NAMESPACE,
    broker_http_addresses,
    chart_app_version,
    create_namespace,
    get,
    items,
    metric_sum,
    name_server,
    ready,
    run,
    save_logs,
    wait_for,
)

CLUSTER = "orders"
DRIFT_SECONDS = 5
"""The operator's drift interval (``operator.driftSeconds``): how often ConsumerGroup status
reads depths from the brokers."""
BROKER_SELECTOR = f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/component=broker"
MESSAGES = 10
"""The Java client's retry scenario: even-numbered messages fail every time, odd ones once."""
MAX_RECONSUME = 2


class Installation:
    """The chart and the examples, installed when first needed and uninstalled at the end."""

    def __init__(self, node: Node, helm: Helm) -> None:
        self.node = node
        self.helm = helm

    def ensure(self) -> Node:
        """The operator installed and rolled out."""
        node = self.node
        create_namespace(node, RELEASE_NAMESPACE)
        if get(node, "deployment", RELEASE, RELEASE_NAMESPACE) is None:
            args = ["install", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE]
            args += [f"--kubeconfig={node.kubeconfig}"]
            args += ["--set", f"operator.driftSeconds={DRIFT_SECONDS}"]
            self.helm.run(*args, timeout_s=120)
        node.kubectl(
            "-n", RELEASE_NAMESPACE, "rollout", "status", f"deployment/{RELEASE}",
            "--timeout=180s", timeout_s=200,
        )  # fmt: skip
        return node

    def ensure_examples(self) -> Node:
        """``kubectl apply -f examples/`` in a restricted namespace, the BrokerCluster ready;
        the examples' DeadLetterJobs (whose S3 sink does not exist here and whose runs take a
        core each) then deleted."""
        node = self.ensure()
        if ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)):
            return node
        create_namespace(node, DEMO_NAMESPACE)
        node.kubectl("-n", DEMO_NAMESPACE, "apply", "-f", str(EXAMPLES))
        wait_for(
            lambda: ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)),
            240,
            "BrokerCluster orders Ready",
            node,
        )
        for example in sorted(EXAMPLES.glob("deadletterjob*.yaml")):
            node.kubectl("-n", DEMO_NAMESPACE, "delete", "-f", str(example), "--ignore-not-found")
        return node

    def uninstall(self) -> None:
        """The documented order (docs/install.md, Uninstalling), then the namespaces; the
        containers' logs are saved first."""
        node = self.node
        save_logs(node, "before-uninstall")
        if get(node, "crd", "brokerclusters.reconsume.io") is not None:
            for kinds in ("dlj", "rcg,rtopic,ruser", "rbc"):
                node.kubectl("delete", kinds, "--all", "-A", "--timeout=180s", timeout_s=200)
        if get(node, "deployment", RELEASE, RELEASE_NAMESPACE) is not None:
            self.helm.run(
                "uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE,
                f"--kubeconfig={node.kubeconfig}", "--wait",
            )  # fmt: skip
        for namespace in (DEMO_NAMESPACE, RELEASE_NAMESPACE):
            node.kubectl(
                "delete", "namespace", namespace, "--ignore-not-found", "--timeout=180s",
                timeout_s=200,
            )  # fmt: skip


def secret_credentials(node: Node, secret: str, namespace: str = DEMO_NAMESPACE) -> Credentials:
    """The keys of a credentials Secret (``accessKey``, ``secretKey``), once it exists."""
    found = wait_for(lambda: get(node, "secret", secret, namespace), 60, f"Secret {secret}", node)
    data = found["data"]
    return Credentials(
        base64.b64decode(data["accessKey"]).decode(), base64.b64decode(data["secretKey"]).decode()
    )


def sign_as(monkeypatch: pytest.MonkeyPatch, credentials: Credentials) -> Credentials:
    """The test's own clients (this process's environment) sign with ``credentials``."""
    monkeypatch.setenv(ACCESS_KEY_ENV, credentials.access_key)
    monkeypatch.setenv(SECRET_KEY_ENV, credentials.secret_key)
    return credentials


def apply_topic_and_group(node: Node, topic: str, group_resource: str, group: str) -> None:
    """A Topic (2 queues per broker) and a ConsumerGroup subscribed to it (one retry queue per
    broker, retries after 1 s and 2 s, :data:`MAX_RECONSUME` of them), both Ready."""
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": topic, "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "queues": 2},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "ConsumerGroup",
                "metadata": {"name": group_resource, "namespace": DEMO_NAMESPACE},
                "spec": {
                    "cluster": CLUSTER,
                    "groupName": group,
                    "retry": {
                        "queueNums": 1,
                        "maxTimes": MAX_RECONSUME,
                        "policy": {"type": "Customized", "delays": ["1s", "2s"]},
                    },
                    "subscriptions": [{"topic": topic}],
                },
            },
        ]
    )
    for kind, name in (("topic", topic), ("consumergroup", group_resource)):
        wait_for(
            lambda kind=kind, name=name: ready(get(node, kind, name, DEMO_NAMESPACE)),
            120,
            f"{kind} {name} Ready",
            node,
        )


@dataclass(frozen=True)
class RetryGroup:
    """A group whose failing consumer left :attr:`dead_letters` in its dead-letter queue."""

    topic: str
    resource: str
    group: str
    dead_letters: int


_groups = itertools.count(1)


def retry_group(node: Node, java_client: JavaClient, state_dir: Path) -> RetryGroup:
    """A new Topic and ConsumerGroup, and Apache RocketMQ's Java client (the compat tier's
    driver, scenario ``retry``) from the machine through the name server's Service:
    :data:`MESSAGES` sent, the even-numbered failing every delivery."""
    number = next(_groups)
    topic, resource, group = f"payments-{number}", f"payments-{number}", f"GID_payments_{number}"
    apply_topic_and_group(node, topic, resource, group)
    brokers = len(broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER))
    run_driver_at(
        java_client,
        name_server(node, DEMO_NAMESPACE, CLUSTER),
        "retry",
        state_dir,
        timeout_s=120,
        topic=topic,
        group=group,
        count=MESSAGES,
        queues=2 * brokers,
        max_reconsume=MAX_RECONSUME,
        retry_queues=brokers,
        **driver_credentials(secret_credentials(node, f"{CLUSTER}-admin")),
    )
    return RetryGroup(topic, resource, group, MESSAGES // 2)


def driver_credentials(credentials: Credentials) -> dict[str, str]:
    """The Java driver's options that make it sign (``AclClientRPCHook``)."""
    return {"access-key": credentials.access_key, "secret-key": credentials.secret_key}


def dlq_depth_everywhere(node: Node, group: RetryGroup) -> tuple[int, int]:
    """The ConsumerGroup's status and the brokers' /metrics: the group's dead letters."""
    found = get(node, "consumergroup", group.resource, DEMO_NAMESPACE) or {}
    status = int((found.get("status") or {}).get("deadLetterDepth", -1))
    scraped = metric_sum(
        broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER),
        "reconsume_dead_letter_depth",
        group=group.group,
    )
    return status, int(scraped)


def run_job(node: Node, name: str, group_resource: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Apply a DeadLetterJob and wait for its end; the finished resource."""
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "DeadLetterJob",
                "metadata": {"name": name, "namespace": DEMO_NAMESPACE},
                "spec": {"consumerGroup": group_resource, **spec},
            }
        ]
    )
    return wait_for(
        lambda: (
            (job := get(node, "deadletterjob", name, DEMO_NAMESPACE))
            and (job.get("status") or {}).get("phase") in {"Succeeded", "Failed"}
            and job
        ),
        300,
        f"DeadLetterJob {name} finished",
        node,
    )


def container_status(pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = pod["status"]["containerStatuses"]
    found: dict[str, Any] = status
    return found


def termination_message(node: Node, job_name: str) -> dict[str, Any]:
    """The result the run's pod left (its container's termination message), the pod from the
    dlq-jobs image and exited 0."""
    (pod,) = items(node, "pods", DEMO_NAMESPACE, f"job-name={job_name}")
    image = f"ghcr.io/reconsume/dlq-jobs:{chart_app_version()}"
    assert pod["spec"]["containers"][0]["image"] == image
    terminated = container_status(pod)["state"]["terminated"]
    assert terminated["exitCode"] == 0, terminated
    message: dict[str, Any] = json.loads(terminated["message"])
    return message


def topic_total(node: Node, topic: str) -> int:
    """Messages stored in ``topic`` on every broker."""

    async def total() -> int:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            return await admin.topic_depth(topic)

    return run(total())


def broker_address(node: Node, broker: str) -> str:
    """``broker``'s address as the BrokerCluster's status lists it."""
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE) or {}
    for entry in (cluster.get("status") or {}).get("brokers") or []:
        if entry["name"] == broker:
            address: str = entry["address"]
            return address
    raise AssertionError(f"{broker} not in the BrokerCluster's status: {cluster.get('status')}")


def patch_cluster(node: Node, spec: dict[str, Any]) -> None:
    patch = json.dumps({"spec": spec})
    node.kubectl(
        "-n", DEMO_NAMESPACE, "patch", "brokercluster", CLUSTER, "--type=merge", "-p", patch
    )
