"""Which broker pod a replicated cluster's rollout restarts next, and the masters the Leases
name (pure functions)."""

from __future__ import annotations

import dataclasses

from reconsume.broker.kube_lease import IN_SYNC
from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.masters import (
    IN_SYNC_ANNOTATION,
    BrokerLease,
    broker_lease,
    broker_leases,
    masters_column,
    with_masters,
)
from reconsume_operator.replicated import BrokerPods, replicas_gated
from reconsume_operator.rollout import PodView, SetView, Step, next_step


def sets(replicas: int = 2, brokers: int = 2) -> dict[int, SetView]:
    return {r: SetView(r, brokers, "new", current=True) for r in range(replicas)}


def pods(
    brokers: int = 2, replicas: int = 2, old: set[str] = frozenset(), **state: str
) -> list[PodView]:
    found = []
    for b in range(brokers):
        for r in range(replicas):
            name = f"orders-broker-{b}" if r == 0 else f"orders-broker-r{r}-{b}"
            found.append(
                PodView(
                    name,
                    b,
                    r,
                    "old" if name in old else "new",
                    ready=state.get(name) != "unready",
                    terminating=state.get(name) == "stopping",
                )
            )
    return found


def healthy(brokers: int = 2, master: int = 0, replicas: int = 2) -> dict[int, BrokerLease]:
    others = frozenset(range(replicas)) - {master}
    return {b: BrokerLease(b, master, 3, others) for b in range(brokers)}


ALL_OLD = {"orders-broker-0", "orders-broker-1", "orders-broker-r1-0", "orders-broker-r1-1"}


def test_nothing_to_do_when_every_pod_runs_the_latest_template() -> None:
    assert next_step(sets(), pods(), healthy()).done


def test_replicas_restart_before_masters_and_masters_hand_over() -> None:
    step = next_step(sets(), pods(old=ALL_OLD), healthy())
    assert step == Step(restart="orders-broker-r1-0")
    # Broker 0's master failed over to replica 1 earlier: its first pod is the replica.
    leases = {0: BrokerLease(0, 1, 4, frozenset({0})), 1: BrokerLease(1, 0, 3, frozenset({1}))}
    assert next_step(sets(), pods(old=ALL_OLD), leases) == Step(restart="orders-broker-0")
    only_masters = {"orders-broker-0", "orders-broker-1"}
    step = next_step(sets(), pods(old=only_masters), healthy())
    assert step == Step(restart="orders-broker-0", hand_over=True)


def test_one_pod_at_a_time_and_only_when_the_broker_is_in_sync() -> None:
    unready = next_step(sets(), pods(old=ALL_OLD, **{"orders-broker-r1-1": "unready"}), healthy())
    assert unready == Step(waiting="pod orders-broker-r1-1 is not ready")
    stopping = next_step(sets(), pods(old=ALL_OLD, **{"orders-broker-0": "stopping"}), healthy())
    assert stopping.waiting == "pod orders-broker-0 is stopping"
    missing = [p for p in pods(old=ALL_OLD) if p.name != "orders-broker-r1-1"]
    assert next_step(sets(), missing, healthy()).waiting == "replica 1 of broker 1 has no pod yet"
    behind = {0: BrokerLease(0, 0, 3, frozenset()), 1: BrokerLease(1, 0, 3, frozenset({1}))}
    # Broker 0's replica is behind: broker 1 goes first, broker 0 waits.
    assert next_step(sets(), pods(old=ALL_OLD), behind) == Step(restart="orders-broker-r1-1")
    only_zero = {"orders-broker-0", "orders-broker-r1-0"}
    step = next_step(sets(), pods(old=only_zero), behind)
    assert step.waiting == "replica 1 of broker 0 is not in sync"
    leaderless = {**healthy(), 0: BrokerLease(0, None, 4, frozenset({1}))}
    assert next_step(sets(), pods(old=only_zero), leaderless).waiting == "broker 0 has no master"


def test_a_broker_gaining_replicas_restarts_its_first_pods_into_the_election() -> None:
    """Its Lease was never held (the pods run without the election): nothing hands over."""
    gaining = {0: SetView(0, 2, "new", current=True), 1: SetView(1, 0, "new", current=True)}
    first_pods = pods(replicas=1, old={"orders-broker-0", "orders-broker-1"})
    never_held = {b: BrokerLease(b, None, 0, frozenset()) for b in range(2)}
    assert next_step(gaining, first_pods, never_held) == Step(restart="orders-broker-0")
    assert next_step(gaining, first_pods, {}) == Step(restart="orders-broker-0")


def test_a_statefulset_its_controller_has_not_seen_waits() -> None:
    unseen = {**sets(), 1: SetView(1, 2, "new", current=False)}
    step = next_step(unseen, pods(old=ALL_OLD), healthy())
    assert step.waiting == "the StatefulSet of replica 1 is being updated"


def lease_body(name: str, holder: str | None, epoch: int, in_sync: str) -> dict[str, object]:
    spec: dict[str, object] = {"leaseTransitions": epoch}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {
        "metadata": {"name": name, "annotations": {IN_SYNC_ANNOTATION: in_sync}},
        "spec": spec,
    }


def test_leases_name_the_master_pod_epoch_and_in_sync_replicas() -> None:
    assert IN_SYNC_ANNOTATION == IN_SYNC  # the broker's format
    lease = broker_lease(
        "orders", lease_body("orders-broker-1", "orders-broker-1-2", 5, "orders-broker-1-0")
    )
    assert lease == BrokerLease(1, 2, 5, frozenset({0}))
    assert broker_lease("orders", lease_body("other-broker-1", None, 0, "")) is None
    empty = broker_lease("orders", {"metadata": {"name": "orders-broker-0"}})
    assert empty == BrokerLease(0, None, 0, frozenset())
    leases = broker_leases(
        "orders", [lease_body("orders-broker-1", "orders-broker-1-2", 5, "orders-broker-1-0")]
    )
    spec = ClusterSpec("orders", replicas=3)
    status = with_masters(
        spec, [{"name": "orders-broker-1", "ready": True}, {"name": "orders-broker-0"}], leases
    )
    assert status[0] == {
        "name": "orders-broker-1",
        "ready": True,
        "master": "orders-broker-r2-1",
        "epoch": 5,
        "inSync": ["orders-broker-1"],
    }
    assert status[1] == {"name": "orders-broker-0"}
    plain = with_masters(ClusterSpec("orders"), [{"name": "orders-broker-0"}], {})
    assert plain == [{"name": "orders-broker-0", "master": "orders-broker-0"}]
    # The MASTERS column: every broker's, "-" where no master is known.
    assert masters_column(status) == "orders-broker-r2-1,-"
    two = with_masters(
        ClusterSpec("orders", brokers=2),
        [{"name": "orders-broker-0"}, {"name": "orders-broker-1"}],
        {},
    )
    assert masters_column(two) == "orders-broker-0,orders-broker-1"


def test_replica_pods_wait_until_the_first_pods_run_the_election() -> None:
    spec = ClusterSpec("orders", brokers=2, replicas=2)
    first = {0: SetView(0, 2, "new", current=True)}
    old = [
        PodView(f"orders-broker-{b}", b, 0, "new", ready=True, terminating=False, elected=False)
        for b in range(2)
    ]
    # The StatefulSet's revisions say "updated" (a template change not applied yet): the
    # pods' own arguments decide.
    assert replicas_gated(spec, BrokerPods(sets=first, pods=old))
    elected = [dataclasses.replace(pod, elected=True) for pod in old]
    assert replicas_gated(spec, BrokerPods(sets=first, pods=elected[:1]))  # one missing
    assert not replicas_gated(spec, BrokerPods(sets=first, pods=elected))
    running = {**first, 1: SetView(1, 2, "new", current=True)}
    assert not replicas_gated(spec, BrokerPods(sets=running, pods=old))  # replicas run already
    assert not replicas_gated(ClusterSpec("orders"), BrokerPods(sets=first, pods=old))
