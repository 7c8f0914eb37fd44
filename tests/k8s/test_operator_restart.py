"""``reconsume operator`` killed in the middle of a reconcile loses nothing: the next one
finishes it, with the spec changed while none ran, and leaves the finalizer and Kopf's
progress annotations consistent."""

from __future__ import annotations

import json
import signal
from typing import Any

from reconsume.client.admin import AdminClient

from ..integration.cluster import Cluster
from .operator_process import Operators, operators
from .operator_support import (
    Resources,
    brokers,
    condition_of,
    crds,
    namespace,
    resources,
    run_admin,
)
from .test_operator_groups import (
    CG,
    DLQ,
    GROUP_NAME,
    RETRY,
    external_cluster,
    group_spec,
    max_times,
    topics_on,
)

__all__ = ["brokers", "crds", "namespace", "operators", "resources"]

NAME = "orders-consumer"
STORAGE = "operator.reconsume.io/"
FINALIZER = "operator.reconsume.io/finalizer"
KOPF_AT_REST = {f"{STORAGE}last-handled-configuration", f"{STORAGE}kopf-managed"}
"""Kopf's annotations on an object no handler is working on (no progress records)."""
INVOKED = "Handler 'reconcile-create' is invoked."


def max_times_on(brokers: Cluster, broker: str) -> int | None:
    async def read(admin: AdminClient) -> int | None:
        config = (await admin.group_configs(brokers.brokers[broker].address)).get(GROUP_NAME)
        return None if config is None else config.retry_max_times

    return run_admin(brokers.name_servers, read)


def kopf_annotations(body: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = body["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith(STORAGE)}


def create_failed(resources: Resources) -> dict[str, Any] | None:
    """The group once Kopf recorded a failed attempt of ``reconcile-create`` and it is not
    Ready."""
    body = resources.get(CG, NAME) or {}
    ready = condition_of(body) or {}
    progress = kopf_annotations(body).get(f"{STORAGE}reconcile-create")
    retried = progress is not None and json.loads(progress).get("retries", 0) >= 1
    return body if retried and ready.get("status") == "False" else None


def assert_settled(
    operators: Operators, resources: Resources, generation: int, retry_max_times: int
) -> None:
    """Ready at ``generation``, then: our finalizer once, no handler progress left, and the
    last handled spec the current one."""

    def settled() -> dict[str, Any] | None:
        # One read: Kopf patches the annotations and the status separately.
        body = resources.get(CG, NAME) or {}
        ready = condition_of(body) or {}
        done = set(kopf_annotations(body)) == KOPF_AT_REST
        current = ready.get("observedGeneration") == generation and ready.get("status") == "True"
        return body if done and current else None

    body = operators.wait(settled, 30, f"settled at generation {generation}")
    assert body["metadata"]["generation"] == generation
    assert body["status"]["observedGeneration"] == generation
    assert (condition_of(body) or {}).get("reason") == "Reconciled"
    assert body["metadata"]["finalizers"] == [FINALIZER]
    handled = json.loads(kopf_annotations(body)[f"{STORAGE}last-handled-configuration"])
    assert handled["spec"]["retry"]["maxTimes"] == retry_max_times
    assert handled["spec"] == body["spec"]


def test_an_operator_killed_mid_reconcile_loses_nothing(
    resources: Resources, brokers: Cluster, operators: Operators
) -> None:
    first = operators.start("first", "--standalone")
    external_cluster(resources, brokers)
    resources.wait_condition("brokerclusters", "orders", "True", "Running")

    # broker-b stops answering: the group's reconcile gets as far as broker-a and retries.
    frozen = brokers.brokers["broker-b"].process
    frozen.send_signal(signal.SIGSTOP)
    try:
        resources.create(CG, NAME, group_spec())
        # The create handler's failed attempt, not the drift timer's (which writes the same
        # condition but no progress): both read from one body.
        body = operators.wait(lambda: create_failed(resources), 30, "reconcile-create failed once")
        condition = condition_of(body) or {}
        assert condition["reason"] == "BrokerUnreachable"
        assert "broker-b" in condition["message"]
        assert max_times_on(brokers, "broker-a") == 5
        assert body["metadata"]["finalizers"] == [FINALIZER]
        progress = json.loads(kopf_annotations(body)[f"{STORAGE}reconcile-create"])
        assert progress["retries"] >= 1
        assert not progress.get("success")
        # Killed while the next attempt waits for the frozen broker.
        operators.wait(lambda: first.log_count(INVOKED) >= progress["retries"] + 1, 30, "retry")
        first.kill()
        # While no operator runs, the spec changes.
        resources.patch(CG, NAME, {"spec": {"retry": {"maxTimes": 3}}})
    finally:
        frozen.send_signal(signal.SIGCONT)

    second = operators.start("second", "--standalone")
    operators.wait(lambda: max_times(brokers) == {"broker-a": 3, "broker-b": 3}, 60, "maxTimes 3")
    assert_settled(operators, resources, 2, 3)
    for broker in brokers.brokers:
        assert {RETRY, DLQ} <= topics_on(brokers, broker)
    assert (second.reconciles("ConsumerGroup") or 0) >= 1

    # Stopped cleanly this time; a change made before the next one starts is applied by it.
    assert second.stop() == 0
    resources.patch(CG, NAME, {"spec": {"retry": {"maxTimes": 1}}})
    third = operators.start("third", "--standalone")
    operators.wait(lambda: max_times(brokers) == {"broker-a": 1, "broker-b": 1}, 60, "maxTimes 1")
    operators.wait(lambda: third.reconciles("ConsumerGroup"), 30, "third operator reconciled")
    assert_settled(operators, resources, 3, 1)
