"""The broker's access-control and TLS metrics as a scrape reports them: off, on, refusals
counted by reason, and reloads of the ACL file and of the certificate files, the last of which
says whether the file in force is the newest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconsume.access.guard import AclGuard
from reconsume.broker.acl_resources import BROKER_RULES
from reconsume.broker.metrics import broker_registry
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.tls import ClientAuth, TlsMode, TlsServerConfig
from reconsume.wire.tls_server import TlsListener

from .test_metrics import Source

ACL = """
[[accounts]]
access_key = "cluster-admin"
secret_key = "admin-secret-1"
admin = true
"""
TWO_ACCOUNTS = (
    ACL
    + """
[[accounts]]
access_key = "orders-team"
secret_key = "orders-secret-1"
"""
)


class SecureSource(Source):
    """A broker before its store opens, with access control and TLS as given."""

    def __init__(self, guard: AclGuard | None, listener: TlsListener | None) -> None:
        super().__init__(None)
        self.guard = guard
        self.listener = listener

    def acl_guard(self) -> AclGuard | None:
        return self.guard

    def tls_listener(self) -> TlsListener | None:
        return self.listener


def scrape(source: Source) -> dict[tuple[str, str], float]:
    text = generate_latest(broker_registry(source, 10)).decode()
    return {
        (sample.name, ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def security_samples(samples: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    return {
        key: value
        for key, value in samples.items()
        if key[0].startswith(("reconsume_acl_", "reconsume_tls_"))
    }


def listener(mode: TlsMode, auth: ClientAuth = ClientAuth.NONE) -> TlsListener:
    """Not started: its counters are what the metrics read."""
    config = TlsServerConfig(mode, "tls.crt", "tls.key", "ca.crt", auth)
    return TlsListener(config, asyncio.Protocol, "broker-a")


def test_without_access_control_and_tls_only_their_switches_are_reported() -> None:
    assert security_samples(scrape(Source(None))) == {
        ("reconsume_acl_enabled", ""): 0,
        ("reconsume_tls_enabled", "client_auth=none,mode=disabled"): 0,
    }


def test_refusals_by_reason_and_accounts(tmp_path: Path) -> None:
    path = tmp_path / "acl.toml"
    path.write_text(ACL)
    guard = AclGuard(path, BROKER_RULES, "broker broker-a")
    unsigned = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
    peer: Any = SimpleNamespace(peer_host="10.1.0.99")
    for _ in range(3):
        assert guard(unsigned, peer) is not None
    samples = scrape(SecureSource(guard, None))
    assert samples[("reconsume_acl_enabled", "")] == 1
    assert samples[("reconsume_acl_refused_requests_total", "reason=unsigned")] == 3
    for reason in ("unknown_account", "bad_signature", "not_admin", "no_permission", "malformed"):
        assert samples[("reconsume_acl_refused_requests_total", f"reason={reason}")] == 0
    assert samples[("reconsume_acl_accounts", "")] == 1
    assert samples[("reconsume_acl_last_reload_successful", "")] == 1


def test_a_failed_acl_reload_shows_until_a_later_one_succeeds(tmp_path: Path) -> None:
    path = tmp_path / "acl.toml"
    path.write_text(ACL)
    guard = AclGuard(path, BROKER_RULES, "broker broker-a")
    source = SecureSource(guard, None)

    def reloads() -> tuple[float, float, float, float]:
        samples = scrape(source)
        return (
            samples[("reconsume_acl_reloads_total", "result=success")],
            samples[("reconsume_acl_reloads_total", "result=failure")],
            samples[("reconsume_acl_last_reload_successful", "")],
            samples[("reconsume_acl_accounts", "")],
        )

    assert reloads() == (0, 0, 1, 1)
    path.write_text(TWO_ACCOUNTS)
    assert guard.reload_if_changed()
    assert reloads() == (1, 0, 1, 2)
    path.write_text(TWO_ACCOUNTS + "[[accounts]]\naccess_key = 'half-written'\n")
    assert not guard.reload_if_changed()
    assert reloads() == (1, 1, 0, 2)  # the previous ACL in force
    assert not guard.reload_if_changed()  # unchanged since: still failing
    assert reloads() == (1, 1, 0, 2)
    path.unlink()  # unreadable: another failure
    assert not guard.reload_if_changed()
    assert reloads() == (1, 2, 0, 2)
    path.write_text(ACL)
    assert guard.reload_if_changed()
    assert reloads() == (2, 2, 1, 1)


def test_tls_mode_connections_and_certificate_reloads() -> None:
    port = listener(TlsMode.PERMISSIVE, ClientAuth.REQUIRED)
    counters = port.counters
    counters.tls, counters.plaintext = 7, 2
    counters.refused_plaintext, counters.failed_handshakes = 0, 3
    counters.reloads, counters.reload_failures = 1, 1
    counters.last_reload_failed = True
    assert security_samples(scrape(SecureSource(None, port))) == {
        ("reconsume_acl_enabled", ""): 0,
        ("reconsume_tls_enabled", "client_auth=required,mode=permissive"): 1,
        ("reconsume_tls_accepted_connections_total", "transport=tls"): 7,
        ("reconsume_tls_accepted_connections_total", "transport=plaintext"): 2,
        ("reconsume_tls_refused_connections_total", "reason=plaintext"): 0,
        ("reconsume_tls_refused_connections_total", "reason=handshake"): 3,
        ("reconsume_tls_certificate_reloads_total", "result=success"): 1,
        ("reconsume_tls_certificate_reloads_total", "result=failure"): 1,
        ("reconsume_tls_certificate_last_reload_successful", ""): 0,
    }
    counters.reloads, counters.last_reload_failed = 2, False  # the files fixed
    samples = scrape(SecureSource(None, port))
    assert samples[("reconsume_tls_certificate_last_reload_successful", "")] == 1
    samples = scrape(SecureSource(None, listener(TlsMode.ENFORCING)))
    assert samples[("reconsume_tls_enabled", "client_auth=none,mode=enforcing")] == 1
