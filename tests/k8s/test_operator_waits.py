"""What a ConsumerGroup does while its name servers do not answer: its deletion ends in a
bounded time (at once when the cluster never came up or it is force-deleted, after the
deletion timeout otherwise), the paused and force-delete annotations act at once rather than
at the next retry, and each reason is posted as one Warning Event, not one per retry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kopf.testing import KopfRunner

from ..integration.cluster import Cluster
from .control_plane import ControlPlane
from .operator_support import (
    Resources,
    brokers,
    crds,
    eventually,
    namespace,
    resources,
    running_operator,
)

__all__ = ["brokers", "crds", "namespace", "resources"]

CG = "consumergroups"
CLOSED = "127.0.0.1:1"
"""A name-server address nothing listens at (connections are refused at once)."""
SLOW_BACKOFF_S = (30.0, 60.0)
"""Retry delays far longer than the tests wait: what they see is not a retry."""


def kopf_retries(body: dict[str, Any] | None, handler: str) -> int:
    """How often Kopf has run ``handler`` on the object (its progress annotation)."""
    annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
    progress = annotations.get(f"operator.reconsume.io/{handler}")
    return int(json.loads(progress).get("retries") or 0) if progress else 0


@pytest.fixture
def patient_operator(namespace: str, control_plane: ControlPlane) -> Iterator[KopfRunner]:
    """An operator whose retries and drift passes come half a minute apart or more."""
    with running_operator(
        namespace, control_plane, drift_s=60.0, backoff_s=SLOW_BACKOFF_S
    ) as runner:
        yield runner


def never_up(resources: Resources) -> None:
    """A cluster whose name servers never answer, and a group of it that waits for them."""
    resources.create("brokerclusters", "gone", {"external": {"nameServer": CLOSED}})
    resources.create(CG, "waiting", {"cluster": "gone", "deletionPolicy": "Delete"})
    resources.wait_condition(CG, "waiting", "False", "NameServerUnreachable")


def test_a_group_of_a_cluster_that_never_came_up_is_deleted_at_once(
    resources: Resources, patient_operator: KopfRunner
) -> None:
    never_up(resources)
    resources.delete(CG, "waiting")
    eventually(lambda: resources.get(CG, "waiting") is None, 15, "group released")
    left = eventually(lambda: resources.events("LeftOnBrokers", "waiting"), 10, "event")
    assert "never became Ready" in left[0]
    assert CLOSED in left[0]


def test_pausing_a_waiting_group_acts_at_once(
    resources: Resources, patient_operator: KopfRunner
) -> None:
    never_up(resources)
    resources.patch(CG, "waiting", {"metadata": {"annotations": {"reconsume.io/paused": "true"}}})
    paused = resources.wait_condition(CG, "waiting", "True", "Paused", kind="Paused", timeout_s=10)
    assert "not reconciled" in paused["message"]


def ready_group(resources: Resources, brokers: Cluster) -> None:
    resources.create(
        "brokerclusters", "orders", {"external": {"nameServer": brokers.namesrv.address}}
    )
    resources.create(CG, "dropped", {"cluster": "orders", "deletionPolicy": "Delete"})
    resources.wait_condition(CG, "dropped", "True", "Reconciled")
    resources.wait_condition("brokerclusters", "orders", "True", "Running")


def test_force_delete_releases_a_deletion_waiting_for_name_servers_at_once(
    resources: Resources, brokers: Cluster, patient_operator: KopfRunner
) -> None:
    ready_group(resources, brokers)
    assert brokers.namesrv.stop() == 0
    resources.delete(CG, "dropped")
    waiting = resources.wait_condition(CG, "dropped", "False", "DeletionWaiting")
    assert "force-delete" in waiting["message"]
    assert resources.get(CG, "dropped") is not None  # a cluster that was up is waited for
    resources.patch(
        CG, "dropped", {"metadata": {"annotations": {"reconsume.io/force-delete": "true"}}}
    )
    eventually(lambda: resources.get(CG, "dropped") is None, 10, "group released")
    left = eventually(lambda: resources.events("LeftOnBrokers", "dropped"), 10, "event")
    assert "force-delete" in left[0]


def test_a_deletion_waits_for_name_servers_at_most_the_deletion_timeout(
    resources: Resources, brokers: Cluster, namespace: str, control_plane: ControlPlane
) -> None:
    with running_operator(namespace, control_plane, deletion_timeout_s=4.0):
        ready_group(resources, brokers)
        assert brokers.namesrv.stop() == 0
        resources.delete(CG, "dropped")
        resources.wait_condition(CG, "dropped", "False", "DeletionWaiting")
        eventually(lambda: resources.get(CG, "dropped") is None, 20, "group released")
        left = eventually(lambda: resources.events("LeftOnBrokers", "dropped"), 10, "event")
        assert "deletion timeout 4 s" in left[0]
        # one warning for the wait, however often it was retried
        assert len(resources.events("DeletionWaiting", "dropped")) == 1


def test_a_reason_is_posted_once_however_often_it_is_retried(
    resources: Resources, namespace: str, control_plane: ControlPlane
) -> None:
    with running_operator(namespace, control_plane):  # retries every 0.5 to 2 s
        never_up(resources)
        eventually(
            lambda: kopf_retries(resources.get(CG, "waiting"), "reconcile-create") >= 4,
            30,
            "four retries",
        )
        assert len(resources.events("NameServerUnreachable", "waiting")) == 1
        unreachable = resources.events("NameServerUnreachable", "gone")
        assert len(unreachable) == 1, unreachable  # the cluster's own, once
