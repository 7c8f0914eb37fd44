"""The broker's access-control metrics: refused requests by reason, and reloads of the ACL
file (those that failed keep the previous ACL in force, which an alert should see)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from reconsume.access.guard import AclGuard
from reconsume.access.perms import REFUSAL_REASONS

PREFIX = "reconsume_"


def acl_metrics(guard: AclGuard | None) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
    """Nothing when access control is off but ``reconsume_acl_enabled 0``."""
    yield GaugeMetricFamily(
        PREFIX + "acl_enabled",
        "1 when requests are checked against an ACL file.",
        guard is not None,
    )
    if guard is None:
        return
    refused = CounterMetricFamily(
        PREFIX + "acl_refused_requests",
        "Requests refused by access control, by reason.",
        labels=["reason"],
    )
    for reason in REFUSAL_REASONS:
        refused.add_metric([reason], guard.refused.get(reason, 0))
    yield refused
    reloads = CounterMetricFamily(
        PREFIX + "acl_reloads",
        "Reads of the changed ACL file, by result (a failure keeps the ACL in force).",
        labels=["result"],
    )
    reloads.add_metric(["success"], guard.reloads)
    reloads.add_metric(["failure"], guard.reload_failures)
    yield reloads
    yield GaugeMetricFamily(
        PREFIX + "acl_accounts", "Accounts in the ACL in force.", len(guard.acl.accounts)
    )
