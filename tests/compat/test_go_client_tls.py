"""Apache RocketMQ's Go client (rocketmq-client-go/v2, unchanged) over TLS, against a name
server and two brokers started with ``--tls-mode enforcing``: ``producer.WithTls`` and
``consumer.WithTls`` (the driver's ``--tls true``). The client does not verify the servers'
certificates (its ``InsecureSkipVerify``); what is checked here is that it speaks TLS on every
connection and sends and consumes as over plaintext."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .conftest import GoClient
from .driver_support import once_each, position
from .go_client_support import run_driver
from .servers import Cluster, committed_at_queue_ends
from .test_java_client_tls import TOPIC, _refusals_logged, ca, cluster

__all__ = ["ca", "cluster"]

GROUP = "go_tls_consumer"


def test_go_client_sends_and_consumes_over_tls(
    go_client: GoClient, cluster: Cluster, tmp_path: Path
) -> None:
    run = run_driver(
        go_client, cluster, "send", tmp_path / "go", topic=TOPIC, group=GROUP,
        prefix="go over tls", count=40, tls="true",
    )  # fmt: skip
    sent = run["sent"]
    assert len(sent) == 40
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert set(once_each(run["received"])) == {s["body"] for s in sent}
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(position(s) for s in sent)
    for server in (cluster.namesrv, *cluster.brokers.values()):
        assert _refusals_logged(server) == 0, "".join(server.output)
