"""A BrokerCluster serving TLS on the node: its certificate from a Secret in cert-manager's
layout, the name server and broker pods enforcing TLS, the broker registering over it, the
operator reconciling a Topic over it (signed, access control being on), a client trusting the
Secret's CA sending, and a plaintext client refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.model import Message
from reconsume.wire.tls import client_context

from ..tls_certs import make_ca
from .node import Node
from .support import DEMO_NAMESPACE, get, name_server, ready, run, wait_for
from .workloads import secret_credentials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER, TOPIC = "secure", "secure-orders"


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
    finally:
        node.kubectl(
            "-n", DEMO_NAMESPACE, "delete", "topic", TOPIC, "--ignore-not-found",
            "--timeout=120s", timeout_s=130,
        )  # fmt: skip
        node.kubectl(
            "-n", DEMO_NAMESPACE, "delete", "brokercluster", CLUSTER, "--ignore-not-found",
            "--timeout=120s", timeout_s=130,
        )  # fmt: skip
