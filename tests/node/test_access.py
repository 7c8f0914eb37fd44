"""Access control on the node, on by default for the examples' BrokerCluster: the examples'
User ``orders-app`` gets a generated key that both broker pods enforce, a Topic's grant lets it
send, what it was not granted is refused; a User created and deleted is revoked on every broker
through the real kubelet's refresh of the mounted ACL Secret."""

from __future__ import annotations

import time
from typing import Any

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.errors import RemotingError
from reconsume.message.model import Message
from reconsume.wire.signing import Credentials

from .node import Node
from .support import DEMO_NAMESPACE, get, name_server, ready, run, wait_for
from .workloads import CLUSTER, secret_credentials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def send(node: Node, credentials: Credentials, topic: str) -> str:
    """ "sent", or the refusal's text."""

    async def go() -> str:
        address = name_server(node, DEMO_NAMESPACE, CLUSTER)
        async with Producer([address], credentials=credentials, send_timeout_s=5.0) as producer:
            try:
                await producer.send(Message(topic, b"x"))
            except RemotingError as exc:
                return str(exc)
        return "sent"

    return run(go())


def user_ready(node: Node, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: (user := get(node, "user", name, DEMO_NAMESPACE)) and ready(user) and user,
        120,
        f"User {name} Ready",
        node,
    )


def test_a_users_key_is_enforced_by_every_broker_pod_and_revoked_on_deletion(
    examples: Node,
) -> None:
    node = examples

    async def create_audit() -> None:
        async with AdminClient([name_server(node, DEMO_NAMESPACE, CLUSTER)]) as admin:
            await admin.create_topic("audit", queues=2, cluster=CLUSTER)

    run(create_audit())  # signed with the cluster's admin account (the fixture's)

    user = user_ready(node, "orders-app")
    assert sorted(b["name"] for b in user["status"]["brokers"]) == [
        "orders-broker-0",
        "orders-broker-1",
    ]
    assert all(b["applied"] for b in user["status"]["brokers"]), user["status"]
    app = secret_credentials(node, "orders-app")
    assert user["status"]["accessKey"] == app.access_key
    assert send(node, app, "orders") == "sent"  # the Topic names it a producer
    refused = send(node, app, "audit")  # the User's own entry: SUB only
    assert f"account {app.access_key} has no PUB on topic audit" in refused, refused
    forged = send(node, Credentials(app.access_key, "not-the-secret-key"), "orders")
    assert "signature" in forged, forged

    node.apply(
        [
            {
                "apiVersion": "reconsume.io/v1alpha1",
                "kind": "User",
                "metadata": {"name": "probe", "namespace": DEMO_NAMESPACE},
                "spec": {"cluster": CLUSTER, "topics": [{"name": "audit", "perm": "PUB"}]},
            }
        ]
    )
    started = time.monotonic()
    user_ready(node, "probe")
    applied_s = time.monotonic() - started
    probe = secret_credentials(node, "probe")
    assert send(node, probe, "audit") == "sent"

    node.kubectl("-n", DEMO_NAMESPACE, "delete", "user", "probe", "--wait=false")
    started = time.monotonic()
    wait_for(
        lambda: "(code 16)" in send(node, probe, "audit"),
        60,
        "the probe's key refused",
        node,
    )
    revoked_s = time.monotonic() - started
    # The kubelet refreshes a mounted Secret on its periodic sync (a minute); the operator's
    # annotation of the pods makes it sync them at once.
    assert revoked_s < 30, f"revoked after {revoked_s:.1f} s"
    print(f"probe applied in {applied_s:.1f} s, revoked in {revoked_s:.1f} s")
