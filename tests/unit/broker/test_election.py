"""The election over a lease file: the first master, renewals, takeover by an in-sync replica
only after the lease went unrenewed for its duration, fencing of the old master, races."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from pathlib import Path

import pytest

from reconsume.broker.election import Elector
from reconsume.broker.lease import FileLeaseStore, LeaseConflict, LeaseRecord


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(
    path: Path, clock: Clock, name: str, *, preferred: bool = False, unclean: bool = False
) -> Elector:
    return Elector(
        FileLeaseStore(path),
        name,
        f"{name}:10911",
        duration_s=6.0,
        margin_s=1.0,
        preferred=preferred,
        unclean=unclean,
        clock=clock,
    )


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def test_the_preferred_broker_takes_the_first_lease_others_wait(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    a = elector(lease, clock, "a", preferred=True)
    b = elector(lease, clock, "b")
    assert not run(b.step()).master  # not preferred: waits for a
    first = run(a.step())
    assert (first.master, first.epoch, first.master_address) == (True, 1, "a:10911")
    assert run(b.step()).master_address == "a:10911"
    clock.now += 20
    assert not run(b.step()).master  # a's lease is there; b only takes an expired one it is in


def test_an_absent_preferred_broker_is_replaced_after_two_durations(tmp_path: Path) -> None:
    clock = Clock()
    b = elector(tmp_path / "lease.json", clock, "b")
    assert not run(b.step()).master
    clock.now += 12
    assert run(b.step()).master


def test_an_in_sync_replica_takes_over_once_the_lease_went_unrenewed(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    a = elector(lease, clock, "a", preferred=True)
    b, c = elector(lease, clock, "b"), elector(lease, clock, "c")
    run(a.step())
    assert run(a.record_in_sync(frozenset({"b"})))
    for _ in range(5):  # renewals keep it
        clock.now += 2
        assert run(a.step()).master
        assert not run(b.step()).master
    deadline = a.valid_until
    clock.now += 5.9  # a stops renewing
    assert not run(b.step()).master
    clock.now += 0.2
    assert clock.now >= deadline  # a stopped writing before anyone could take over
    assert clock.now >= a.valid_until  # a may no longer write
    assert not run(c.step()).master  # not in sync
    taken = run(b.step())
    assert (taken.master, taken.epoch) == (True, 2)
    deposed = run(a.step())  # a comes back: fenced
    assert (deposed.master, deposed.master_address) == (False, "b:10911")
    assert not run(a.record_in_sync(frozenset()))


def test_with_nobody_in_sync_only_an_unclean_election_replaces_the_master(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    run(elector(lease, clock, "a", preferred=True).step())
    clean, unclean = elector(lease, clock, "b"), elector(lease, clock, "c", unclean=True)
    run(clean.step())
    run(unclean.step())
    clock.now += 7
    assert not run(clean.step()).master
    assert run(unclean.step()).master


def test_of_two_in_sync_replicas_racing_one_wins(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    a = elector(lease, clock, "a", preferred=True)
    run(a.step())
    run(a.record_in_sync(frozenset({"b", "c"})))
    b, c = elector(lease, clock, "b"), elector(lease, clock, "c")
    run(b.step())
    run(c.step())
    clock.now += 7

    async def race() -> list[bool]:
        return [s.master for s in await asyncio.gather(b.step(), c.step())]

    assert sorted(run(race())) == [False, True]


def test_the_lease_file_is_compare_and_swap(tmp_path: Path) -> None:
    store = FileLeaseStore(tmp_path / "lease.json")
    first = run(store.write(LeaseRecord("a", "a:1", 1), None))
    with pytest.raises(LeaseConflict):
        run(store.write(LeaseRecord("b", "b:1", 1), None))
    second = run(store.write(LeaseRecord("a", "a:1", 1, ("b",)), first.version))
    with pytest.raises(LeaseConflict):
        run(store.write(LeaseRecord("c", "c:1", 2), first.version))
    assert run(store.read()) == second


def test_a_lock_held_past_the_wait_is_a_conflict_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer stopped while it holds the lease file's lock (SIGSTOP) must not hang the
    others' writes: they fail as conflicts, to be retried, and write once it is released."""
    monkeypatch.setattr("reconsume.broker.lease.LOCK_WAIT_S", 0.2)
    path = tmp_path / "lease.json"
    store = FileLeaseStore(path)
    first = run(store.write(LeaseRecord("a", "a:1", 1), None))
    held = os.open(tmp_path / "lease.json.lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(LeaseConflict, match=r"stayed locked for 0\.2 s"):
            run(store.write(LeaseRecord("b", "b:1", 2), first.version))
        assert 0.2 <= time.monotonic() - started < 2
    finally:
        os.close(held)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lease.json", "lease.json.lock"]
    taken = run(store.write(LeaseRecord("b", "b:1", 2), first.version))
    assert run(store.read()) == taken
    assert (taken.holder, taken.version) == ("b", "2")


def test_a_renewal_and_a_write_of_the_in_sync_set_at_once_do_not_depose_the_master(
    tmp_path: Path,
) -> None:
    clock = Clock()
    a = elector(tmp_path / "lease.json", clock, "a", preferred=True)
    run(a.step())

    async def together() -> None:
        for i in range(20):
            await asyncio.gather(a.step(), a.record_in_sync(frozenset({f"r{i}"})))

    run(together())
    assert a.master
    assert a.epoch == 1
    assert a.takeovers == 0  # the first lease was nobody's


def test_taking_a_lease_from_another_counts_as_a_takeover(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    a = elector(lease, clock, "a", preferred=True)
    b = elector(lease, clock, "b")
    run(a.step())
    run(a.record_in_sync(frozenset({"b"})))
    run(b.step())
    clock.now += 7
    assert run(b.step()).master
    assert (a.takeovers, b.takeovers) == (0, 1)


def test_a_lease_is_taken_above_the_epochs_the_brokers_own_log_holds(tmp_path: Path) -> None:
    """A store that was master before (a broker that gains replicas, a Lease made anew) keeps
    its epoch history growing: a lease newer than the log is not needed to take it."""
    clock = Clock()
    lease = tmp_path / "lease.json"
    a = elector(lease, clock, "a", preferred=True)
    a.floor_epoch = lambda: 7
    assert run(a.step()).epoch == 8
    b = elector(lease, clock, "b", unclean=True)
    b.floor_epoch = lambda: 1
    assert not run(b.step()).master
    clock.now += 20  # a is gone; b's log is behind the lease: the lease's next epoch
    taken = run(b.step())
    assert (taken.master, taken.epoch) == (True, 9)


def test_a_restarted_master_leaves_the_lease_to_its_in_sync_replica(tmp_path: Path) -> None:
    clock = Clock()
    lease = tmp_path / "lease.json"
    a, b = elector(lease, clock, "a", preferred=True), elector(lease, clock, "b")
    assert run(a.step()).master
    assert run(a.record_in_sync(frozenset({"b"})))
    run(b.step())
    restarted = elector(lease, clock, "a", preferred=True)  # a's process again, at once
    waiting = run(restarted.step())
    # the lease still names a's address: nobody to follow (not itself) until b takes over
    assert (waiting.master, waiting.master_address) == (False, None)
    clock.now += 7  # a's lease expired by b's clock
    assert run(b.step()).master
    following = run(restarted.step())
    assert (following.master, following.master_address) == (False, b.address)
    # Alone (nobody in sync), a restarted master takes its lease back at once.
    lone = tmp_path / "lone.json"
    c = elector(lone, clock, "c", preferred=True)
    assert run(c.step()).master
    assert run(elector(lone, clock, "c", preferred=True).step()).master
    # With a replica listed that never takes over, after two durations.
    solo = tmp_path / "solo.json"
    d = elector(solo, clock, "d", preferred=True)
    assert run(d.step()).master
    assert run(d.record_in_sync(frozenset({"gone"})))
    again = elector(solo, clock, "d", preferred=True)
    assert not run(again.step()).master
    clock.now += 13
    assert run(again.step()).master
