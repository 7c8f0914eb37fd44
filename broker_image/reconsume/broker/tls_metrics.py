"""The broker's TLS metrics, from the counters of its remoting port's
:class:`~reconsume.wire.tls_server.TlsListener`: the mode, connections taken and refused, and
reloads of the certificate files (a failed one leaves the previous certificate in force, which
an alert should see before it expires).

The files are looked at when a TLS connection arrives (at most once a second), so a change is
counted at the first such connection after it.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from reconsume.wire.tls import ClientAuth, TlsMode
from reconsume.wire.tls_server import TlsListener

PREFIX = "reconsume_"


def tls_metrics(listener: TlsListener | None) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
    """Nothing when TLS is off but ``reconsume_tls_enabled{mode="disabled"} 0``."""
    enabled = GaugeMetricFamily(
        PREFIX + "tls_enabled",
        "1 when the remoting port speaks TLS, labelled with the mode (permissive: plaintext "
        "too; enforcing: TLS only) and the client certificates asked for.",
        labels=["mode", "client_auth"],
    )
    if listener is None:
        enabled.add_metric([TlsMode.DISABLED.value, ClientAuth.NONE.value], 0)
        yield enabled
        return
    config = listener.config
    enabled.add_metric([config.mode.value, config.client_auth.value], 1)
    yield enabled
    counters = listener.counters
    accepted = CounterMetricFamily(
        PREFIX + "tls_accepted_connections",
        "Connections the remoting port took, by transport (plaintext: under permissive only).",
        labels=["transport"],
    )
    accepted.add_metric(["tls"], counters.tls)
    accepted.add_metric(["plaintext"], counters.plaintext)
    yield accepted
    refused = CounterMetricFamily(
        PREFIX + "tls_refused_connections",
        "Connections closed by TLS, by reason: plaintext (under enforcing) or a failed handshake.",
        labels=["reason"],
    )
    refused.add_metric(["plaintext"], counters.refused_plaintext)
    refused.add_metric(["handshake"], counters.failed_handshakes)
    yield refused
    reloads = CounterMetricFamily(
        PREFIX + "tls_certificate_reloads",
        "Reads of the changed certificate, key and CA files, by result (a failure keeps the "
        "previous certificate in force).",
        labels=["result"],
    )
    reloads.add_metric(["success"], counters.reloads)
    reloads.add_metric(["failure"], counters.reload_failures)
    yield reloads
    yield GaugeMetricFamily(
        PREFIX + "tls_certificate_last_reload_successful",
        "0 while the certificate files last changed into ones that do not load (new "
        "connections get the previous certificate); else 1.",
        not counters.last_reload_failed,
    )
