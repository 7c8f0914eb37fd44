"""The broker's access-control metrics: refused requests by reason, and reloads of the ACL
file (those that failed keep the previous ACL in force, which an alert should see).

Whether the *last* reload failed is not in the counters (a failure and a success between two
scrapes cannot be ordered from them): ``reconsume_acl_last_reload_successful`` exports the
guard's own record of it, as Prometheus's ``prometheus_config_last_reload_successful`` does for
its configuration.
"""

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
        PREFIX + "acl_last_reload_successful",
        "0 while the ACL file last changed into one that does not read (an older ACL is in "
        "force: its revocations and new accounts are not); else 1.",
        not guard.last_reload_failed,
    )
    yield GaugeMetricFamily(
        PREFIX + "acl_accounts", "Accounts in the ACL in force.", len(guard.acl.accounts)
    )
