"""Two replicas of ``reconsume operator`` with Kopf peering: exactly one acts, and when it is
killed the other takes over within the peering lifetime."""

from __future__ import annotations

import time
from typing import Any

import kubernetes.client

from ..integration.cluster import Cluster
from .operator_process import DRIFT_S, Operators, operators
from .operator_support import Resources, brokers, crds, namespace, resources
from .test_operator_groups import CG, external_cluster, group_spec, max_times

__all__ = ["brokers", "crds", "namespace", "operators", "resources"]

LIFETIME_S = 5
"""The replicas' peering lifetime: a killed replica is presumed gone this long after its last
keep-alive (sent every second at this lifetime)."""
PAUSING = "Pausing operations in favour of"
RESUMING = "Resuming operations after the pause"


def peers(api: kubernetes.client.ApiClient, namespace: str) -> dict[str, Any]:
    """The replicas in the namespace's KopfPeering ``reconsume`` (identity: priority, ...)."""
    custom = kubernetes.client.CustomObjectsApi(api)
    body = custom.get_namespaced_custom_object(
        "kopf.dev", "v1", namespace, "kopfpeerings", "reconsume"
    )
    status: dict[str, Any] = body.get("status") or {}
    return status


def test_two_replicas_exactly_one_acts_and_the_other_takes_over(
    api: kubernetes.client.ApiClient,
    resources: Resources,
    brokers: Cluster,
    operators: Operators,
) -> None:
    lifetime = ("--peering-lifetime", str(LIFETIME_S))
    # Alone, the low-priority replica creates the missing peering object and acts.
    low = operators.start("low", "--priority", "10", *lifetime)
    operators.wait(lambda: low.log_count(RESUMING) == 1, 30, "low replica active")
    assert "created the peering object KopfPeering reconsume" in low.log_text()
    external_cluster(resources, brokers)
    resources.wait_condition("brokerclusters", "orders", "True", "Running")
    assert (low.reconciles("BrokerCluster") or 0) >= 1

    # A replica of higher priority arrives: the low one pauses, the high one acts.
    high = operators.start("high", "--priority", "20", *lifetime)
    operators.wait(lambda: high.log_count(RESUMING) == 1, 30, "high replica active")
    operators.wait(lambda: low.log_count(PAUSING) == 1, 30, "low replica paused")
    priorities = sorted(peer["priority"] for peer in peers(api, resources.namespace).values())
    assert priorities == [10, 20]

    resources.create(CG, "orders-consumer", group_spec())
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")
    assert max_times(brokers) == {"broker-a": 5, "broker-b": 5}
    # Create, then drift checks: the high replica keeps reconciling, the low one never starts.
    operators.wait(lambda: (high.reconciles("ConsumerGroup") or 0) >= 3, 10 * DRIFT_S, "drift")
    assert low.reconciles("ConsumerGroup") == 0
    assert low.reconciles("ConsumerGroup", "error") == 0
    assert "orders-consumer" not in low.log_text()
    assert low.log_count(RESUMING) == 1  # only the first, before the high replica came

    # The active replica is killed; a change made now is applied by the other one.
    killed_at = time.monotonic()
    high.kill()
    resources.patch(CG, "orders-consumer", {"spec": {"retry": {"maxTimes": 2}}})

    def taken_over() -> bool:
        return bool(low.reconciles("ConsumerGroup")) and max_times(brokers) == {
            "broker-a": 2,
            "broker-b": 2,
        }

    operators.wait(taken_over, LIFETIME_S + 30, "takeover by the low replica")
    takeover_s = time.monotonic() - killed_at
    assert low.log_count(RESUMING) == 2
    assert takeover_s < LIFETIME_S + 15, f"takeover took {takeover_s:.1f} s"
    # Applied on the brokers comes before the status write: wait for the status of generation 2.
    operators.wait(
        lambda: (
            (resources.get(CG, "orders-consumer") or {}).get("status", {}).get("observedGeneration")
            == 2
        ),
        30,
        "status of generation 2",
    )
    ready = resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")
    assert ready["observedGeneration"] == 2
    # The killed replica's record is cleaned from the peering object.
    operators.wait(lambda: len(peers(api, resources.namespace)) == 1, 2 * LIFETIME_S, "cleanup")
    print(f"takeover {takeover_s:.1f} s after the kill (peering lifetime {LIFETIME_S} s)")
