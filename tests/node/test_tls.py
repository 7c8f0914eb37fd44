"""A BrokerCluster serving TLS on the node: its certificate from a Secret in cert-manager's
layout, the name server and broker pods enforcing TLS, the broker registering over it, the
operator reconciling a Topic and a ConsumerGroup over it (signed, access control being on), a
client trusting the Secret's CA sending, a plaintext client refused, and a DeadLetterJob's run
(a Job pod, Spark local) reprocessing dead letters over TLS with its own account."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConcurrentContext, ConsumeStatus
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.settings import ConsumerSettings
from reconsume.errors import ReconsumeError
from reconsume.message.model import Message, StoredMessage
from reconsume.message.names import dead_letter_topic
from reconsume.wire.signing import Credentials
from reconsume.wire.tls import client_context

from ..polling import eventually_async
from ..tls_certs import make_ca
from .node import Node
from .support import DEMO_NAMESPACE, get, items, name_server, ready, run, wait_for
from .workloads import run_job, secret_credentials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER, TOPIC = "secure", "secure-orders"
GROUP_RESOURCE, GROUP = "secure-consumer", "GID_secure"
DEAD_LETTERS = 4


async def fill_dead_letters(
    address: str, admin: Credentials, tls: ssl.SSLContext, count: int
) -> int:
    """``count`` messages sent, then every message of the topic failed once by the group (no
    reconsume), over TLS: the number of dead letters (the topic's messages)."""

    async def fail(batch: list[StoredMessage], context: ConcurrentContext) -> ConsumeStatus:
        return ConsumeStatus.RECONSUME_LATER

    async with Producer([address], credentials=admin, tls=tls) as producer:
        for index in range(count):
            await producer.send(Message(TOPIC, f"dead-{index}".encode()))
    async with AdminClient([address], credentials=admin, tls=tls) as client:
        total = await client.topic_depth(TOPIC)  # with what was sent before
    settings = ConsumerSettings(instance_name="secure-failing", max_reconsume_times=0)
    consumer = PushConsumer([address], GROUP, settings=settings, credentials=admin, tls=tls)
    consumer.subscribe(TOPIC)
    consumer.register_listener(fail)
    await consumer.start()
    try:
        async with AdminClient([address], credentials=admin, tls=tls) as client:

            async def all_dead() -> bool:
                return await client.topic_depth(dead_letter_topic(GROUP)) == total

            await eventually_async(all_dead, 120, "every message dead-lettered")
    finally:
        await consumer.shutdown()
    return total


def test_a_cluster_serving_tls_is_reached_by_its_brokers_the_operator_and_clients(
    examples: Node, tmp_path: Path
) -> None:
    node = examples
    ca = make_ca(tmp_path / "ca")  # no host names are checked: pods are reached by address
    node.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": f"{CLUSTER}-tls", "namespace": DEMO_NAMESPACE},
                "stringData": {
                    "tls.crt": ca.server.cert_file.read_text(),
                    "tls.key": ca.server.key_file.read_text(),
                    "ca.crt": ca.ca_file.read_text(),
                },
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": CLUSTER, "namespace": DEMO_NAMESPACE},
                "spec": {"brokers": 1, "tls": {"secretName": f"{CLUSTER}-tls"}},
            },
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": TOPIC, "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "queues": 2},
            },
        ]
    )
    try:
        wait_for(
            lambda: ready(get(node, "topic", TOPIC, DEMO_NAMESPACE)),
            300,
            "the TLS cluster and its topic Ready",
            node,
        )
        admin = secret_credentials(node, f"{CLUSTER}-admin")
        address = name_server(node, DEMO_NAMESPACE, CLUSTER)
        tls = client_context(str(ca.ca_file))

        async def send(over_tls: bool) -> str:
            """ "sent", or why not."""
            try:
                async with Producer(
                    [address],
                    credentials=admin,
                    tls=tls if over_tls else False,
                    send_timeout_s=5.0,
                ) as producer:
                    await producer.send(Message(TOPIC, b"over tls"))
            except (ReconsumeError, OSError) as exc:
                return f"{type(exc).__name__}: {exc}"
            return "sent"

        assert run(send(True)) == "sent"
        assert run(send(False)) != "sent"

        # Dead letters of a group of the TLS cluster, reprocessed by a run in a pod.
        node.apply(
            [
                {
                    "apiVersion": "reconsume.io/v1alpha1",
                    "kind": "ConsumerGroup",
                    "metadata": {"name": GROUP_RESOURCE, "namespace": DEMO_NAMESPACE},
                    "spec": {
                        "cluster": CLUSTER,
                        "groupName": GROUP,
                        "subscriptions": [{"topic": TOPIC}],
                    },
                }
            ]
        )
        wait_for(
            lambda: ready(get(node, "consumergroup", GROUP_RESOURCE, DEMO_NAMESPACE)),
            120,
            "the TLS cluster's group Ready",
            node,
        )
        dead = run(fill_dead_letters(address, admin, tls, DEAD_LETTERS))
        assert dead == DEAD_LETTERS + 1  # and the message sent over TLS above
        job = run_job(node, "secure-replay", GROUP_RESOURCE, {"action": "Reprocess"})
        assert job["status"]["phase"] == "Succeeded", job["status"]
        assert job["status"]["counts"]["resent"] == dead, job["status"]
        (pod,) = items(node, "pods", DEMO_NAMESPACE, "job-name=secure-replay-1")
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["RECONSUME_TLS"] == "true"
        assert env["RECONSUME_CREDENTIALS_DIR"] == "/var/run/reconsume/credentials"
    finally:
        node.kubectl(
            "-n", DEMO_NAMESPACE, "delete", "dlj", "secure-replay", "--ignore-not-found",
            "--timeout=120s", timeout_s=130,
        )  # fmt: skip
        node.kubectl(
            "-n", DEMO_NAMESPACE, "delete", f"topic/{TOPIC}", f"rcg/{GROUP_RESOURCE}",
            "--ignore-not-found", "--timeout=120s", timeout_s=130,
        )  # fmt: skip
        node.kubectl(
            "-n", DEMO_NAMESPACE, "delete", "brokercluster", CLUSTER, "--ignore-not-found",
            "--timeout=120s", timeout_s=130,
        )  # fmt: skip
