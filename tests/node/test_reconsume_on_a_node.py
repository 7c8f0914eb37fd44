"""reconsume as a user runs it on Kubernetes, on the tier's one-node cluster: the chart
installed with helm, the examples applied with kubectl, brokers as pods from the image built
from broker_image/Dockerfile on volumes of the default StorageClass, a real RocketMQ client
(Apache RocketMQ's Java client 4.9.8) from the machine through the name server's Service,
DeadLetterJobs as Job pods from the dlq-jobs image, a broker pod deleted, the cluster scaled
and rolled, and the documented uninstall.

The tests run in file order and each builds on the installation its fixtures make (module
scope); any one of them also runs alone, its fixtures making what it needs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_topic
from reconsume.wire.codes import RequestCode

from ..chart.helm import Helm
from ..compat.conftest import JavaClient
from ..compat.java_client_support import run_driver_at
from ..integration.retry_support import read_queue
from ..integration.wire_client import BrokerClient, ok
from .cluster import Node
from .support import (
    DEMO_NAMESPACE,
    EXAMPLES,
    RELEASE,
    RELEASE_NAMESPACE,
    REPO,
    broker_http_addresses,
    chart_app_version,
    condition,
    create_namespace,
    describe,
    get,
    helm_install,
    items,
    metric_sum,
    name_server,
    pod_ready,
    ready,
    run,
    save_logs,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER = "orders"
TOPIC, GROUP_RESOURCE, GROUP = "payments", "payments-consumer", "GID_payments"
MESSAGES = 10
"""The Java client's retry scenario: even-numbered messages fail every time, odd ones once."""
MAX_RECONSUME = 2
DEAD_LETTERS = MESSAGES // 2
DRIFT_SECONDS = 5
"""The operator's drift interval (``operator.driftSeconds``): how often ConsumerGroup status
reads depths from the brokers."""
BROKER_SELECTOR = f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/component=broker"


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def installed(node: Node, helm: Helm) -> Iterator[Node]:
    """The chart installed (2 replicas, peering) in a namespace enforcing the restricted Pod
    Security profile; uninstalled at the end unless a test did."""
    create_namespace(node, RELEASE_NAMESPACE)
    if get(node, "deployment", RELEASE, RELEASE_NAMESPACE) is None:
        helm_install(helm, node, f"operator.driftSeconds={DRIFT_SECONDS}")
    node.kubectl(
        "-n", RELEASE_NAMESPACE, "rollout", "status", f"deployment/{RELEASE}", "--timeout=180s",
        timeout_s=200,
    )  # fmt: skip
    yield node
    uninstall(node, helm)


@pytest.fixture(scope="module")
def demo(installed: Node) -> Node:
    """``kubectl apply -f examples/`` in a restricted namespace, the BrokerCluster ready; the
    examples' DeadLetterJobs (whose runs fail without their S3 bucket and take a core each) are
    then deleted, and the tests' Topic and ConsumerGroup applied."""
    node = installed
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
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": TOPIC, "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "queues": 2},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "ConsumerGroup",
                "metadata": {"name": GROUP_RESOURCE, "namespace": DEMO_NAMESPACE},
                "spec": {
                    "cluster": CLUSTER,
                    "groupName": GROUP,
                    "retry": {
                        "queueNums": 1,
                        "maxTimes": MAX_RECONSUME,
                        "policy": {"type": "Customized", "delays": ["1s", "2s"]},
                    },
                    "subscriptions": [{"topic": TOPIC}],
                },
            },
        ]
    )
    for kind, name in (("topic", TOPIC), ("consumergroup", GROUP_RESOURCE)):
        wait_for(
            lambda kind=kind, name=name: ready(get(node, kind, name, DEMO_NAMESPACE)),
            120,
            f"{kind} {name} Ready",
            node,
        )
    return node


@pytest.fixture(scope="module")
def dead_letters(
    demo: Node, java_client: JavaClient, tmp_path_factory: pytest.TempPathFactory
) -> int:
    """The Java client's retry scenario run once: :data:`DEAD_LETTERS` in ``%DLQ%GID_payments``."""
    run_driver_at(
        java_client,
        name_server(demo, DEMO_NAMESPACE, CLUSTER),
        "retry",
        tmp_path_factory.mktemp("java-retry"),
        timeout_s=120,
        topic=TOPIC,
        group=GROUP,
        count=MESSAGES,
        queues=4,
        max_reconsume=MAX_RECONSUME,
        retry_queues=2,
    )
    return DEAD_LETTERS


def uninstall(node: Node, helm: Helm) -> None:
    """The documented order (docs/install.md, Uninstalling), then the namespaces."""
    save_logs(node, "before-uninstall")
    for kinds in ("dlj", "rcg,rtopic", "rbc"):
        node.kubectl("delete", kinds, "--all", "-A", "--wait=true", "--timeout=180s", timeout_s=200)
    if get(node, "deployment", RELEASE, RELEASE_NAMESPACE) is not None:
        helm.run(
            "uninstall",
            RELEASE,
            "--namespace",
            RELEASE_NAMESPACE,
            f"--kubeconfig={node.kubeconfig}",
            "--wait",
        )
    for namespace in (DEMO_NAMESPACE, RELEASE_NAMESPACE):
        node.kubectl(
            "delete", "namespace", namespace, "--ignore-not-found", "--timeout=180s", timeout_s=200
        )


def dlq_depth_everywhere(node: Node) -> tuple[int, int]:
    """The ConsumerGroup's status and the brokers' /metrics: dead letters of GID_payments."""
    group = get(node, "consumergroup", GROUP_RESOURCE, DEMO_NAMESPACE) or {}
    status = int((group.get("status") or {}).get("deadLetterDepth", -1))
    scraped = metric_sum(
        broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER),
        "reconsume_dead_letter_depth",
        group=GROUP,
    )
    return status, int(scraped)


# ------------------------------------------------------------------ 1. the operator
def test_the_operator_runs_as_the_charts_pods(installed: Node) -> None:
    node = installed
    deployment = get(node, "deployment", RELEASE, RELEASE_NAMESPACE)
    assert deployment is not None
    assert deployment["status"].get("readyReplicas") == 2, deployment["status"]
    pods = items(node, "pods", RELEASE_NAMESPACE, "app.kubernetes.io/name=reconsume")
    running = [pod for pod in pods if pod["status"]["phase"] == "Running" and pod_ready(pod)]
    assert len(running) == 2, describe(node)
    for pod in running:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == f"ghcr.io/reconsume/operator:{chart_app_version()}"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        # Kopf's liveness endpoint, as the kubelet's probe reaches it.
        status = container_status(pod)
        assert status["ready"], status
        assert status["restartCount"] == 0, status
    # Peering: both replicas keep the ClusterKopfPeering alive; exactly one acts.
    peering = wait_for(
        lambda: (
            (p := get(node, "clusterkopfpeering", "reconsume"))
            and len(p.get("status") or {}) == 2
            and p
        ),
        60,
        "two peers in ClusterKopfPeering reconsume",
        node,
    )
    assert len(peering["status"]) == 2

    def paused() -> list[bool]:
        """Per replica, whether its last word on peering was to pause."""
        logs = [
            node.kubectl("-n", RELEASE_NAMESPACE, "logs", pod["metadata"]["name"]).stdout
            for pod in running
        ]
        return [log.rfind("Pausing operations") > log.rfind("Resuming operations") for log in logs]

    # Two replicas started together can both act until the first keep-alive after their
    # start (Kopf's peering lifetime, 60 s): then exactly one does.
    wait_for(lambda: sorted(paused()) == [False, True], 90, "exactly one replica acting", node)


def container_status(pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = pod["status"]["containerStatuses"]
    found: dict[str, Any] = status
    return found


# ------------------------------------------------------------------ 2. the examples
def test_the_examples_run_brokers_on_their_volumes(demo: Node) -> None:
    node = demo
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)
    assert cluster is not None
    assert ready(cluster), cluster
    pods = items(node, "pods", DEMO_NAMESPACE, f"app.kubernetes.io/instance={CLUSTER}")
    images = {c["image"] for pod in pods for c in pod["spec"]["containers"]}
    assert images == {f"ghcr.io/reconsume/reconsume:{chart_app_version()}"}
    brokers = sorted(
        pod["metadata"]["name"]
        for pod in pods
        if pod["metadata"]["name"].startswith("orders-broker-")
    )
    assert brokers == ["orders-broker-0", "orders-broker-1"]
    registered = {b["name"]: b["address"] for b in cluster["status"]["brokers"]}
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    for name in brokers:
        assert registered[name] == f"{by_name[name]['status']['podIP']}:10911"
    # Each broker's store is its own volume claim, bound to a local volume of the default
    # class; the kubelet made it writable for the pods' fsGroup, and the broker wrote there.
    for name in brokers:
        claim = get(node, "pvc", f"store-{name}", DEMO_NAMESPACE)
        assert claim is not None
        assert claim["status"]["phase"] == "Bound", claim
        volume = get(node, "pv", claim["spec"]["volumeName"])
        assert volume is not None
        path = Path(volume["spec"]["local"]["path"])
        assert path.parent == node.layout.volumes
        assert path.stat().st_gid == 10001, oct(path.stat().st_mode)
        assert (path / "commitlog").is_dir(), sorted(p.name for p in path.iterdir())
    for kind, name in (("consumergroup", "orders-consumer"), ("topic", "orders")):
        assert ready(get(node, kind, name, DEMO_NAMESPACE)), name
    listing = node.kubectl("-n", DEMO_NAMESPACE, "get", "reconsume").stdout
    header = next(
        line for line in listing.splitlines() if line.startswith("NAME") and "DLQ" in line
    )
    assert header.split()[:6] == ["NAME", "GROUP", "CLUSTER", "READY", "RETRY", "DLQ"], listing
    orders = next(
        line
        for line in listing.splitlines()
        if line.startswith("consumergroup.reconsume.io/orders-consumer")
    )
    assert orders.split()[3:6] == ["True", "0", "0"], listing

    # The name server the machine reaches through its Service knows both brokers.
    async def brokers_of_the_name_server() -> set[str]:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            return {broker.name for broker in await admin.brokers(CLUSTER)}

    assert run(brokers_of_the_name_server()) == set(brokers)


# ------------------------------------------------------------------ 3. retries into the DLQ
def test_a_failing_java_consumer_fills_the_dead_letter_queue(demo: Node, dead_letters: int) -> None:
    node = demo
    # The ConsumerGroup's status (the operator reads the brokers every DRIFT_SECONDS) and
    # the brokers' own /metrics agree on the dead letters the client made.
    wait_for(
        lambda: dlq_depth_everywhere(node) == (dead_letters, dead_letters),
        60,
        f"{dead_letters} dead letters in status and /metrics (now {dlq_depth_everywhere(node)})",
        node,
    )
    addresses = broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER)
    # Even-numbered messages failed 3 times (the last one dead-letters them), odd ones once.
    sends_back = metric_sum(addresses, "reconsume_send_back_total", group=GROUP)
    assert sends_back == DEAD_LETTERS * (MAX_RECONSUME + 1) + (MESSAGES - DEAD_LETTERS)
    assert metric_sum(addresses, "reconsume_dead_letters_total", group=GROUP) == dead_letters
    group = get(node, "consumergroup", GROUP_RESOURCE, DEMO_NAMESPACE)
    assert group is not None
    assert group["status"]["retryDepth"] == 0
    assert group["status"]["deadLetterTopic"] == dead_letter_topic(GROUP)


# ------------------------------------------------------------------ 4. dead-letter jobs
def run_job(node: Node, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Apply a DeadLetterJob and wait for its end; the finished resource."""
    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "DeadLetterJob",
                "metadata": {"name": name, "namespace": DEMO_NAMESPACE},
                "spec": {"consumerGroup": GROUP_RESOURCE, **spec},
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


def termination_message(node: Node, job_name: str) -> dict[str, Any]:
    (pod,) = items(node, "pods", DEMO_NAMESPACE, f"job-name={job_name}")
    assert (
        pod["spec"]["containers"][0]["image"] == f"ghcr.io/reconsume/dlq-jobs:{chart_app_version()}"
    )
    terminated = container_status(pod)["state"]["terminated"]
    assert terminated["exitCode"] == 0, terminated
    message: dict[str, Any] = json.loads(terminated["message"])
    return message


def test_dead_letter_jobs_drain_and_reprocess_as_job_pods(demo: Node, dead_letters: int) -> None:
    node = demo
    wait_for(
        lambda: dlq_depth_everywhere(node)[1] == dead_letters, 60, "dead letters on the brokers"
    )
    topic_before = run(topic_total(node))
    drained = run_job(
        node,
        "payments-drain",
        {
            "action": "Drain",
            "filter": "properties['index'] in ('0', '2')",
            "sink": {"format": "parquet", "path": "file:///tmp/dlq-archive/"},
        },
    )
    assert drained["status"]["phase"] == "Succeeded", drained["status"]
    message = termination_message(node, "payments-drain-1")
    counts = drained["status"]["counts"]
    assert counts == message["counts"]
    assert (counts["read"], counts["matched"], counts["archived"]) == (dead_letters, 2, 2), counts
    reprocessed = run_job(
        node, "payments-reprocess", {"action": "Reprocess", "target": {"topic": TOPIC}}
    )
    assert reprocessed["status"]["phase"] == "Succeeded", reprocessed["status"]
    counts = reprocessed["status"]["counts"]
    assert counts == termination_message(node, "payments-reprocess-1")["counts"]
    assert counts["resent"] == dead_letters - 2, counts
    # The resent messages are in the topic again; none is left in the dead-letter queue.
    assert run(topic_total(node)) == topic_before + dead_letters - 2
    wait_for(lambda: dlq_depth_everywhere(node) == (0, 0), 60, "an empty dead-letter queue", node)


async def topic_total(node: Node, topic: str = TOPIC) -> int:
    """Messages stored in ``topic`` on every broker."""
    async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
        return await admin.topic_depth(topic)


# ------------------------------------------------------------------ 5. a broker pod deleted
def broker_address(node: Node, broker: str) -> str:
    cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE) or {}
    for entry in (cluster.get("status") or {}).get("brokers") or []:
        if entry["name"] == broker:
            address: str = entry["address"]
            return address
    raise AssertionError(f"{broker} not in the BrokerCluster's status: {cluster.get('status')}")


def test_a_deleted_broker_pod_comes_back_on_its_volume(demo: Node) -> None:
    node = demo
    broker = "orders-broker-0"
    old_pod = get(node, "pod", broker, DEMO_NAMESPACE)
    assert old_pod is not None
    claim_volume = (get(node, "pvc", f"store-{broker}", DEMO_NAMESPACE) or {})["spec"]["volumeName"]
    namesrv = name_server(node, DEMO_NAMESPACE, CLUSTER)

    async def send() -> tuple[list[tuple[int, int, bytes]], list[bytes]]:
        """50 messages to broker-0's queues (acknowledged: their positions) and 5 delayed by
        level 3 (10 s in the example's levels), still in the schedule when the pod goes."""
        acked = []
        delayed = []
        async with Producer([namesrv]) as producer:
            for index in range(50):
                body = f"kept-{index}".encode()
                result = await producer.send(Message(TOPIC, body))
                if result.queue.broker_name == broker:
                    acked.append((result.queue.queue_id, result.queue_offset, body))
        async with BrokerClient() as client:
            address = broker_address(node, broker)
            for index in range(5):
                body = f"delayed-{index}".encode()
                ok(
                    await client.send(
                        address, TOPIC, body, queue_id=index % 2, properties={"DELAY": "3"}
                    )
                )
                delayed.append(body)
        return acked, delayed

    acked, delayed = run(send())
    assert acked, "no message went to the broker that is deleted"
    sent_at = time.time()
    node.kubectl("-n", DEMO_NAMESPACE, "delete", "pod", broker, "--wait=true", timeout_s=120)
    new_pod = wait_for(
        lambda: (
            (pod := get(node, "pod", broker, DEMO_NAMESPACE))
            and pod["metadata"]["uid"] != old_pod["metadata"]["uid"]
            and pod_ready(pod)
            and pod
        ),
        180,
        f"{broker} re-created and ready",
        node,
    )
    # The same claim, so the same volume.
    (store,) = [v for v in new_pod["spec"]["volumes"] if v["name"] == "store"]
    assert store["persistentVolumeClaim"]["claimName"] == f"store-{broker}"
    assert (get(node, "pvc", f"store-{broker}", DEMO_NAMESPACE) or {})["spec"][
        "volumeName"
    ] == claim_volume
    wait_for(
        lambda: (
            ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and broker_address(node, broker).startswith(new_pod["status"]["podIP"])
        ),
        120,
        "the new pod registered",
        node,
    )
    address = broker_address(node, broker)

    async def read(queue_id: int) -> list[Any]:
        async with BrokerClient() as client:
            return await read_queue(client, address, TOPIC, queue_id)

    stored = {q: {m.queue_offset: m.body for m in run(read(q))} for q in (0, 1)}
    for queue_id, offset, body in acked:
        assert stored[queue_id].get(offset) == body, (queue_id, offset)

    # The delayed messages were in the schedule topic across the restart: they arrive, not
    # before their delay.
    def delivered() -> set[bytes] | None:
        bodies = {m.body for q in (0, 1) for m in run(read(q))}
        return set(delayed) <= bodies and set(delayed)

    wait_for(delivered, 120, "the delayed messages delivered after the restart", node)
    assert time.time() - sent_at >= 10


# ------------------------------------------------------------------ 6. scaling and rolling
def test_brokers_scale_up_and_down_and_roll_on_a_settings_change(demo: Node) -> None:
    node = demo
    patch_cluster(node, {"brokers": 3})
    wait_for(
        lambda: (
            (c := get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and ready(c)
            and len(c["status"]["brokers"]) == 3
        ),
        240,
        "3 brokers registered",
        node,
    )
    group = wait_for(
        lambda: (
            (g := get(node, "consumergroup", GROUP_RESOURCE, DEMO_NAMESPACE))
            and len((g.get("status") or {}).get("brokers") or []) == 3
            and g
        ),
        120,
        "the ConsumerGroup configured on the third broker",
        node,
    )
    assert ready(group)
    # Messages on the third broker block its removal until they are consumed.
    address = broker_address(node, "orders-broker-2")

    async def fill() -> None:
        async with BrokerClient() as client:
            for index in range(20):
                ok(await client.send(address, TOPIC, f"on-2-{index}".encode(), queue_id=index % 2))

    run(fill())
    patch_cluster(node, {"brokers": 2})
    blocked = wait_for(
        lambda: (
            (c := get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE))
            and condition(c).get("reason") == "ScaleDownBlocked"
            and c
        ),
        120,
        "ScaleDownBlocked",
        node,
    )
    assert "orders-broker-2" in condition(blocked)["message"]
    assert (get(node, "statefulset", "orders-broker", DEMO_NAMESPACE) or {})["spec"][
        "replicas"
    ] == 3

    async def consume() -> None:
        async with BrokerClient() as client:
            for queue_id in (0, 1):
                messages = await read_queue(client, address, TOPIC, queue_id)
                end = max(m.queue_offset for m in messages) + 1
                ok(await client.update_offset(address, GROUP, TOPIC, queue_id, end))

    run(consume())
    wait_for(
        lambda: (
            (s := get(node, "statefulset", "orders-broker", DEMO_NAMESPACE))
            and s["spec"]["replicas"] == 2
            and get(node, "pod", "orders-broker-2", DEMO_NAMESPACE) is None
        ),
        240,
        "the StatefulSet scaled down to 2",
        node,
    )
    wait_for(
        lambda: ready(get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)),
        120,
        "Ready with 2 brokers",
        node,
    )
    # The operator says why it removed the broker.
    events = node.kubectl(
        "-n", DEMO_NAMESPACE, "get", "events", "--field-selector",
        f"involvedObject.name={CLUSTER},reason=ScalingDown", "-o", "json",
    )  # fmt: skip
    messages = [event["message"] for event in json.loads(events.stdout)["items"]]
    assert any("orders-broker-2 drained" in message for message in messages), messages

    # A settings-only change (the delay levels) restarts the brokers one at a time.
    before = {
        pod["metadata"]["name"]: pod["metadata"]["uid"]
        for pod in items(node, "pods", DEMO_NAMESPACE, BROKER_SELECTOR)
    }
    levels = "1s 2s 3s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    patch_cluster(node, {"delayLevels": levels})
    wait_for(
        lambda: all(
            (p := get(node, "pod", name, DEMO_NAMESPACE))
            and p["metadata"]["uid"] != uid
            and pod_ready(p)
            for name, uid in before.items()
        ),
        300,
        "every broker restarted",
        node,
    )

    def registered_as_running() -> dict[str, str] | None:
        """Ready, with the address of each broker's new pod in the status."""
        cluster = get(node, "brokercluster", CLUSTER, DEMO_NAMESPACE)
        pods = {
            p["metadata"]["name"]: p for p in items(node, "pods", DEMO_NAMESPACE, BROKER_SELECTOR)
        }
        addresses = {
            b["name"]: b["address"] for b in (cluster or {}).get("status", {}).get("brokers", [])
        }
        expected = {name: f"{pod['status'].get('podIP')}:10911" for name, pod in pods.items()}
        return ready(cluster) and addresses == expected and addresses

    addresses = wait_for(registered_as_running, 120, "Ready after the roll, new addresses", node)

    async def levels_in_effect() -> set[str]:
        async with BrokerClient() as client:
            found = set()
            for address in addresses.values():
                response = ok(await client.invoke(address, RequestCode.GET_BROKER_CONFIG))
                config = dict(
                    line.split("=", 1)
                    for line in response.body.decode().splitlines()
                    if "=" in line
                )
                found.add(config["messageDelayLevel"])
            return found

    assert run(levels_in_effect()) == {levels}


def patch_cluster(node: Node, spec: dict[str, Any]) -> None:
    node.kubectl(
        "-n",
        DEMO_NAMESPACE,
        "patch",
        "brokercluster",
        CLUSTER,
        "--type=merge",
        "-p",
        json.dumps({"spec": spec}),
    )


# ------------------------------------------------------------------ 7. uninstall
def test_the_documented_uninstall_leaves_nothing_behind(
    installed: Node, helm: Helm, demo: Node
) -> None:
    node = installed
    uninstall(node, helm)
    # docs/install.md, step 4: the CRDs last.
    node.kubectl(
        "delete",
        "-f",
        str(REPO / "crds"),
        "-f",
        str(REPO / "crds" / "kopf" / "peering.yaml"),
        "--timeout=120s",
        timeout_s=150,
    )
    for namespace in (DEMO_NAMESPACE, RELEASE_NAMESPACE):
        assert get(node, "namespace", namespace) is None
    assert not [p for p in items(node, "pods") if p["metadata"]["namespace"] != "kube-system"], (
        describe(node)
    )
    # The brokers' claims went with their namespace, their volumes and directories with them.
    wait_for(lambda: not items(node, "pv"), 120, "every PersistentVolume deleted", node)
    wait_for(lambda: not any(node.layout.volumes.iterdir()), 60, "every volume directory removed")
    crds = node.kubectl("get", "crd", "-o", "name").stdout
    assert "reconsume.io" not in crds, crds
    assert "kopf.dev" not in crds, crds
    assert not node.provisioner.errors, node.provisioner.errors
