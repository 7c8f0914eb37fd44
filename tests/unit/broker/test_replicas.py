"""A master's view of its replicas: who is in sync, and when a Sync-replicated write counts as
stored."""

from __future__ import annotations

import pytest

from reconsume.broker.replicas import ReplicaSet
from reconsume.errors import ReplicaUnavailableError


class Log:
    end = 0


def replica_set(
    *,
    sync: bool = True,
    accept_alone: bool = False,
    asked: list[frozenset[str]] | None = None,
    told: list[int | None] | None = None,
) -> tuple[ReplicaSet, Log]:
    """A replica set over a log whose end the test moves; the sets the lease is asked to
    record go to ``asked``, the read limits to ``told``."""
    log = Log()
    replicas = ReplicaSet(
        log_end=lambda: log.end,
        sync=sync,
        lag_max_s=2.0,
        accept_alone=accept_alone,
        on_change=(asked if asked is not None else []).append,
        on_visible=None if told is None else told.append,
    )
    return replicas, log


def test_without_sync_replication_every_write_counts_at_once() -> None:
    replicas, _log = replica_set(sync=False)
    assert replicas.gate(1000).done()


def test_with_no_replica_in_sync_a_write_is_refused_or_counted_alone() -> None:
    replicas, _log = replica_set()
    with pytest.raises(ReplicaUnavailableError, match="no replica is in sync"):
        replicas.gate(100).result(0)
    assert replicas.refused_total == 1
    alone, _log = replica_set(accept_alone=True)
    assert alone.gate(100).result(0) is None
    assert alone.stored_alone_total == 1


def test_a_write_waits_for_every_in_sync_replica() -> None:
    replicas, log = replica_set()
    log.end = 500
    replicas.seen("a", "10.0.0.1:1", 500, 500, now_s=0.0)
    replicas.seen("b", "10.0.0.2:1", 500, 500, now_s=0.0)
    assert [r.replica_id for r in replicas.in_sync] == ["a", "b"]
    log.end = 800
    gate = replicas.gate(800)
    replicas.seen("a", "10.0.0.1:1", 800, 800, now_s=0.1)
    assert not gate.done()  # b has not stored it yet
    replicas.seen("b", "10.0.0.2:1", 800, 800, now_s=0.2)
    assert gate.result(0) is None


def test_a_replica_that_falls_behind_leaves_the_set_and_releases_the_writes() -> None:
    replicas, log = replica_set()
    log.end = 100
    replicas.seen("a", "x", 100, 100, now_s=0.0)
    replicas.seen("b", "y", 100, 100, now_s=0.0)
    log.end = 300
    gate = replicas.gate(300)
    replicas.seen("a", "x", 300, 300, now_s=0.5)
    replicas.tick(1.5)
    assert not gate.done()
    replicas.seen("a", "x", 300, 300, now_s=2.5)
    replicas.tick(2.5)  # b last held everything at 0.0: more than 2 s ago
    assert [r.replica_id for r in replicas.in_sync] == ["a"]
    assert gate.result(0) is None


def test_a_streaming_replica_stays_in_sync_while_it_holds_what_it_was_sent() -> None:
    replicas, log = replica_set()
    log.end = 1000
    replicas.seen("a", "x", 0, 0, now_s=0.0)
    assert not replicas.in_sync  # never caught up yet
    replicas.answered("a", 1000, reached_end=True, now_s=0.1)
    log.end = 1500  # more arrived meanwhile
    replicas.seen("a", "x", 1000, 1000, now_s=0.2)
    assert [r.replica_id for r in replicas.in_sync] == ["a"]  # held the end as of 0.1
    replicas.tick(2.05)
    assert replicas.in_sync
    replicas.tick(2.2)
    assert not replicas.in_sync


def test_the_last_in_sync_replica_leaving_refuses_what_waits() -> None:
    replicas, log = replica_set()
    log.end = 10
    replicas.seen("a", "x", 10, 10, now_s=0.0)
    log.end = 20
    gate = replicas.gate(20)
    replicas.forget("a", now_s=0.1)
    with pytest.raises(ReplicaUnavailableError):
        gate.result(0)


def test_closing_fails_what_waits() -> None:
    replicas, log = replica_set()
    log.end = 10
    replicas.seen("a", "x", 10, 10, now_s=0.0)
    gate = replicas.gate(20)
    replicas.close()
    with pytest.raises(Exception, match="stopped being master"):
        gate.result(0)


def test_with_a_lease_the_recorded_set_counts_until_the_smaller_one_is_recorded() -> None:
    replicas, log = replica_set()
    replicas.recorded = frozenset()
    log.end = 100
    replicas.seen("a", "x", 100, 100, now_s=0.0)
    replicas.seen("b", "y", 100, 100, now_s=0.0)
    replicas.record(frozenset({"a", "b"}))
    log.end = 200
    gate = replicas.gate(200)
    replicas.forget("b", now_s=0.1)  # b may still be elected: it is in the lease
    replicas.seen("a", "x", 200, 200, now_s=0.2)
    assert not gate.done()
    replicas.record(frozenset({"a"}))
    assert gate.result(0) is None


def test_the_lease_is_asked_to_record_the_live_set() -> None:
    asked: list[frozenset[str]] = []
    replicas, _log = replica_set(asked=asked)
    replicas.recorded = frozenset()
    replicas.seen("a", "x", 0, 0, now_s=0.0)
    assert asked[-1] == {"a"}
    replicas.record(frozenset({"a"}))
    asked.clear()
    replicas.forget("a", now_s=1.0)
    assert asked == []  # nobody left and nothing accepted alone: a keeps its place


def test_with_a_lease_and_acceptance_alone_a_write_waits_for_the_record_to_empty() -> None:
    replicas, log = replica_set(accept_alone=True)
    replicas.recorded = frozenset()
    log.end = 10
    replicas.seen("a", "x", 10, 10, now_s=0.0)
    replicas.record(frozenset({"a"}))
    log.end = 20
    gate = replicas.gate(20)
    replicas.forget("a", now_s=0.1)
    assert not gate.done()
    replicas.record(frozenset())
    assert gate.result(0) is None
    assert replicas.stored_alone_total == 1


def test_with_a_lease_and_nobody_left_a_write_is_refused_at_once() -> None:
    replicas, log = replica_set()
    replicas.recorded = frozenset()
    log.end = 10
    replicas.seen("a", "x", 10, 10, now_s=0.0)
    replicas.record(frozenset({"a"}))
    replicas.forget("a", now_s=0.1)
    with pytest.raises(ReplicaUnavailableError):
        replicas.gate(20).result(0)


def test_reads_stop_where_every_replica_that_may_take_over_holds_the_log() -> None:
    told: list[int | None] = []
    replicas, log = replica_set(told=told)
    replicas.recorded = frozenset()
    log.end = 100
    assert replicas.read_limit is None  # no replica could take over: the whole log is read
    replicas.seen("a", "x", 100, 100, now_s=0.0)  # in sync, so about to be recorded
    assert (replicas.read_limit, told) == (100, [100])
    assert replicas.read_limit_for("a") is None  # nobody else may take over from a's view
    replicas.record(frozenset({"a"}))
    log.end = 300
    replicas.seen("b", "y", 50, 50, now_s=0.1)  # connected, not in sync: not counted
    replicas.seen("a", "x", 250, 250, now_s=0.1)
    assert (replicas.read_limit, replicas.read_limit_for("b")) == (250, 250)
    replicas.seen("b", "y", 300, 300, now_s=0.2)  # caught up: in sync, counted at once
    replicas.seen("a", "x", 300, 300, now_s=0.2)
    assert (replicas.read_limit, replicas.read_limit_for("a")) == (300, 300)
    replicas.record(frozenset({"a", "b"}))
    log.end = 400
    replicas.seen("a", "x", 400, 400, now_s=0.3)
    replicas.forget("b", now_s=0.3)  # departed but recorded: it may take over with 300
    assert replicas.read_limit == 300
    replicas.record(frozenset({"a"}))
    assert replicas.read_limit == 400
    assert told == [100, 250, 300, 400]  # told each move, once


def test_a_recorded_replica_never_seen_holds_nothing_that_can_be_read() -> None:
    replicas, log = replica_set()
    log.end = 100
    replicas.record(frozenset({"z"}))  # recorded before this master saw it (a takeover)
    assert replicas.read_limit == 0
    replicas.seen("z", "x", 40, 40, now_s=0.0)
    assert replicas.read_limit == 40


@pytest.mark.parametrize("accept_alone", [False, True])
def test_a_lagging_last_replica_keeps_its_place_in_the_lease_unless_writes_go_on_alone(
    accept_alone: bool,
) -> None:
    asked: list[frozenset[str]] = []
    replicas, log = replica_set(accept_alone=accept_alone, asked=asked)
    replicas.recorded = frozenset()
    replicas.seen("a", "x", 0, 0, now_s=0.0)
    replicas.record(frozenset({"a"}))
    asked.clear()
    log.end = 100
    replicas.tick(now_s=5.0)  # a stopped answering: out of sync, still connected
    assert replicas.live_ids() == frozenset()
    # refused writes leave a holding every acknowledged one: it may still take over
    assert asked == ([frozenset()] if accept_alone else [])
    assert replicas.to_record() == (frozenset() if accept_alone else None)
