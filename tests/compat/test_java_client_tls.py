"""Apache RocketMQ's Java client (rocketmq-client 4.9.8, unchanged) over TLS, against a name
server and two brokers started with ``--tls-mode enforcing`` (the brokers registering over TLS).

The client turns TLS on with RocketMQ's own system properties (``TlsSystemConfig``):
``tls.enable=true``, and, to verify the servers' certificate against our CA rather than trust
any (its test mode, the default), ``tls.test.mode.enable=false``, ``tls.client.authServer=true``
and ``tls.client.trustCertPath``. With them it sends and consumes as over plaintext; the same
client without them is refused.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconsume.wire.tls import TLS_CA_FILE_ENV, TLS_ENV

from ..integration.cluster import SMALL_SEGMENTS
from ..integration.processes import ServerProcess, start_server
from ..integration.retry_support import TEST_DELAY_LEVELS
from ..tls_certs import CertAuthority, make_ca
from .conftest import JavaClient
from .driver_support import once_each, position, scenario_args
from .java_client_support import CONSUMING, check_protocol, run_driver_at
from .servers import BROKERS, Cluster, committed_at_queue_ends, create_topic, stop_cleanly

TOPIC = "java-tls"
GROUP = "java_tls_consumer"
CLUSTER_NAME = "compat-tls"
REFUSED_LINE = "closed a plaintext connection from 127.0.0.1: TLS is enforced"


@dataclass(frozen=True)
class TlsJavaClient(JavaClient):
    """The driver with JVM system properties added (before ``-jar``)."""

    properties: tuple[str, ...] = ()

    def command(self, scenario: str, *args: str, state_dir: Path) -> list[str]:
        java, *rest = super().command(scenario, *args, state_dir=state_dir)
        return [java, *self.properties, *rest]


def java_tls_properties(ca: CertAuthority) -> tuple[str, ...]:
    return (
        "-Dtls.enable=true",
        "-Dtls.test.mode.enable=false",
        "-Dtls.client.authServer=true",
        f"-Dtls.client.trustCertPath={ca.ca_file}",
    )


def _tls_flags(ca: CertAuthority) -> tuple[str, ...]:
    return (
        "--tls-mode", "enforcing", "--tls-cert-file", str(ca.server.cert_file),
        "--tls-key-file", str(ca.server.key_file),
    )  # fmt: skip


@contextmanager
def tls_cluster(root: Path, ca: CertAuthority, extra: Sequence[str] = ()) -> Iterator[Cluster]:
    """:func:`.servers.compat_cluster`, every port TLS-only; the brokers register over TLS
    (``RECONSUME_TLS`` in their environment)."""
    root.mkdir(parents=True, exist_ok=True)
    env = {TLS_ENV: "true", TLS_CA_FILE_ENV: str(ca.ca_file)}
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", *_tls_flags(ca))
    cluster = Cluster(namesrv)
    try:
        for name in BROKERS:
            config = root / f"{name}.toml"
            config.write_text(SMALL_SEGMENTS)
            cluster.brokers[name] = start_server(
                "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv.address,
                "--store-dir", str(root / name), "--broker-name", name,
                "--cluster", CLUSTER_NAME, "--flush", "Sync", "--config", str(config),
                "--delay-levels", TEST_DELAY_LEVELS, *_tls_flags(ca), *extra, env=env,
            )  # fmt: skip
        yield cluster
    finally:
        stop_cleanly(cluster.brokers, namesrv)


@pytest.fixture
def ca(tmp_path: Path) -> CertAuthority:
    return make_ca(tmp_path / "ca")


@pytest.fixture
def cluster(
    tmp_path: Path, ca: CertAuthority, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    # Our own clients (topic creation, reading offsets back) speak TLS too.
    monkeypatch.setenv(TLS_ENV, "true")
    monkeypatch.setenv(TLS_CA_FILE_ENV, str(ca.ca_file))
    with tls_cluster(tmp_path / "servers", ca) as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


def _refusals_logged(server: ServerProcess) -> int:
    return sum(REFUSED_LINE in line for line in server.output)


def test_java_client_sends_and_consumes_over_tls(
    java_client: JavaClient, cluster: Cluster, ca: CertAuthority, tmp_path: Path
) -> None:
    client = TlsJavaClient(java_client.java, java_client.jar, java_tls_properties(ca))
    run = run_driver_at(
        client, cluster.namesrv.address, "send", tmp_path / "java", topic=TOPIC, group=GROUP,
        prefix="over tls", count=40,
    )  # fmt: skip
    check_protocol(run, CONSUMING)
    sent = run["sent"]
    assert len(sent) == 40
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert set(once_each(run["received"])) == {s["body"] for s in sent}
    # What the brokers hold, read back over TLS with our client: the group's offsets at the
    # end of every queue the client sent to.
    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(position(s) for s in sent)
    # The client spoke TLS on every connection: nothing was refused.
    for server in (cluster.namesrv, *cluster.brokers.values()):
        assert _refusals_logged(server) == 0, "".join(server.output)


def test_the_java_client_without_tls_is_refused(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    timeout_s = 25  # the driver gives up after 15 s
    args = scenario_args(
        cluster.namesrv.address,
        timeout_s,
        {"topic": TOPIC, "group": GROUP, "prefix": "plaintext", "count": 1},
    )
    command = java_client.command("send", *args, state_dir=tmp_path / "java")
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s + 15, check=False
    )
    events = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    assert completed.returncode != 0, completed.stdout[-3000:]
    assert not [e for e in events if e["event"] in ("sent", "received")], events
    assert _refusals_logged(cluster.namesrv) == 1, "".join(cluster.namesrv.output)
