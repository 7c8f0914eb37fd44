"""A replica's store against its master's: the same bytes at the same offsets and the same
consume queues whatever way the stream is cut, across a replica's restart, after bad input,
after a divergent tail is cut back, and when a replica starts over past the master's retention.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconsume.errors import NotMasterError, ReplicationError
from reconsume.store import MessageStore
from reconsume.store.epochs import agreed_end

from ._helpers import check_consistency, request, small_settings

SETTINGS = small_settings()
TOPICS = ("orders", "%RETRY%g", "SCHEDULE_TOPIC_XXXX")

messages = st.lists(
    st.tuples(st.sampled_from(TOPICS), st.integers(0, 2), st.binary(max_size=700)),
    min_size=1,
    max_size=40,
)


def open_store(root: Path) -> MessageStore:
    return MessageStore(root, SETTINGS, background=False)


def write(store: MessageStore, batch: list[tuple[str, int, bytes]]) -> None:
    for topic, queue_id, body in batch:
        store.append(request(topic, queue_id, body, tags="t"))


def log_bytes(store: MessageStore) -> bytes:
    out = bytearray()
    offset = store.commitlog.min_offset
    while offset < store.commitlog.write_offset:
        chunk = store.read_log(offset, 1 << 20)
        out += chunk
        offset += len(chunk)
    return bytes(out)


def queues(store: MessageStore) -> dict[tuple[str, int], tuple[int, int, list[object]]]:
    return {
        (q.topic, q.queue_id): (q.min_offset, q.max_offset, q.entries(q.min_offset, 1 << 20))
        for q in store.queues
        if q.max_offset > q.min_offset
    }


def replicate(master: MessageStore, replica: MessageStore, rng: random.Random) -> None:
    """Pump the master's log into the replica in chunks of random size, each cut in pieces."""
    while replica.replica.received_offset < master.commitlog.write_offset:
        offset = replica.replica.received_offset
        chunk = master.read_log(offset, rng.choice([7, 100, 1000, 5000]))
        assert chunk, f"nothing to read at {offset}"
        cuts = sorted(rng.sample(range(1, len(chunk)), min(len(chunk) - 1, rng.randint(0, 3))))
        start = 0
        for cut in [*cuts, len(chunk)]:
            replica.replica.apply(offset + start, chunk[start:cut])
            start = cut


def assert_same(master: MessageStore, replica: MessageStore) -> None:
    assert replica.commitlog.write_offset == master.commitlog.write_offset
    assert replica.commitlog.min_offset == master.commitlog.min_offset
    assert log_bytes(replica) == log_bytes(master)
    assert queues(replica) == queues(master)
    check_consistency(replica)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=messages, second=messages, seed=st.integers(0, 2**32))
def test_a_replica_holds_the_masters_log_however_the_stream_is_cut(
    tmp_path_factory: pytest.TempPathFactory,
    first: list[tuple[str, int, bytes]],
    second: list[tuple[str, int, bytes]],
    seed: int,
) -> None:
    root = tmp_path_factory.mktemp("r")
    rng = random.Random(seed)
    with open_store(root / "master") as master, open_store(root / "replica") as replica:
        replica.is_replica = True
        write(master, first)
        replicate(master, replica, rng)
        assert_same(master, replica)
        write(master, second)
        replicate(master, replica, rng)
        assert_same(master, replica)


def test_a_restarted_replica_continues_where_its_last_whole_record_ends(tmp_path: Path) -> None:
    rng = random.Random(7)
    with open_store(tmp_path / "master") as master:
        write(master, [("orders", i % 3, bytes([i]) * (50 + 13 * i)) for i in range(60)])
        replica = open_store(tmp_path / "replica")
        half = master.read_log(0, 1500)
        replica.replica.apply(0, half)
        whole = replica.commitlog.write_offset
        assert 0 < whole < 1500 == replica.replica.received_offset  # a partial record waits
        replica.close()
        with open_store(tmp_path / "replica") as replica:
            assert replica.replica.received_offset == whole
            replicate(master, replica, rng)
            assert_same(master, replica)


def test_bad_input_is_refused_and_the_stream_resumes(tmp_path: Path) -> None:
    rng = random.Random(3)
    with open_store(tmp_path / "master") as master, open_store(tmp_path / "replica") as replica:
        write(master, [("orders", 0, b"x" * 300) for _ in range(10)])
        chunk = master.read_log(0, 10_000)
        with pytest.raises(ReplicationError, match="start at offset 100"):
            replica.replica.apply(100, chunk)  # a gap
        assert replica.commitlog.write_offset == 0
        damaged = bytearray(chunk)
        first_size = int.from_bytes(chunk[:4], "big")
        damaged[chunk.index(b"x" * 300, first_size) + 5] ^= 0xFF  # the second record's body
        with pytest.raises(ReplicationError, match="CRC"):
            replica.replica.apply(0, bytes(damaged))
        last = replica.commitlog.write_offset
        assert last == first_size  # the record before the damaged one is kept
        assert replica.replica.received_offset == last
        with pytest.raises(ReplicationError, match="physical offset"):
            replica.replica.apply(last, chunk[: len(chunk) - last])  # the first record again
        garbage = bytes(rng.randrange(256) for _ in range(4096))
        with pytest.raises(ReplicationError):
            replica.replica.apply(replica.replica.restart_stream(), garbage)
        replica.replica.restart_stream()
        replicate(master, replica, rng)
        assert_same(master, replica)


def test_a_record_out_of_its_queues_order_is_refused_after_the_ones_before_it(
    tmp_path: Path,
) -> None:
    """Two records of one queue in one chunk, the second claiming the first's queue offset:
    refused, the first written and indexed."""
    with open_store(tmp_path / "master") as master, open_store(tmp_path / "replica") as replica:
        write(master, [("orders", 0, b"a" * 100), ("orders", 0, b"b" * 100)])
        chunk = bytearray(master.read_log(0, 10_000))
        first_size = int.from_bytes(chunk[:4], "big")
        queue_offset_at = 20  # size, magic, body CRC, queue id, flag, then the queue offset
        chunk[first_size + queue_offset_at : first_size + queue_offset_at + 8] = bytes(8)
        with pytest.raises(ReplicationError, match="continues at 1"):
            replica.replica.apply(0, bytes(chunk))
        assert replica.commitlog.write_offset == first_size
        assert queues(replica)[("orders", 0)][:2] == (0, 1)


def test_written_is_told_once_the_records_are_in_the_log_before_they_are_indexed(
    tmp_path: Path,
) -> None:
    """A replica acknowledges from ``written``: the log holds the records (what counts as
    stored); the consume queues follow right after."""
    with open_store(tmp_path / "master") as master, open_store(tmp_path / "replica") as replica:
        write(master, [("orders", i % 2, b"x" * 200) for i in range(6)])
        chunk = master.read_log(0, 10_000)
        seen: list[tuple[int, dict[tuple[str, int], tuple[int, int, list[object]]]]] = []
        appended = replica.replica.apply(
            0, chunk, written=lambda: seen.append((replica.commitlog.write_offset, queues(replica)))
        )
        assert seen == [(len(chunk), {})]
        assert {key: len(codes) for key, codes in appended.items()} == {
            ("orders", 0): 3,
            ("orders", 1): 3,
        }
        assert_same(master, replica)


def test_a_replica_refuses_appends_of_its_own(tmp_path: Path) -> None:
    with open_store(tmp_path / "replica") as replica:
        replica.is_replica = True
        with pytest.raises(NotMasterError, match="is a replica"):
            replica.append(request("orders", 0, b"x"))


def test_a_deposed_master_cuts_its_unacknowledged_tail_and_follows(tmp_path: Path) -> None:
    rng = random.Random(11)
    with open_store(tmp_path / "a") as a, open_store(tmp_path / "b") as b:
        a.epochs.begin(1, 0)
        write(a, [("orders", i % 2, b"acknowledged %d" % i * 20) for i in range(30)])
        replicate(a, b, rng)
        b.epochs.follow(a.epochs.entries)
        agreed = a.commitlog.write_offset
        write(a, [("orders", 0, b"never replicated %d" % i * 20) for i in range(12)])
        tail = log_bytes(a)[agreed:]
        # b is elected in epoch 2 and writes on
        b.epochs.begin(2, b.commitlog.write_offset)
        write(b, [("orders", 1, b"new master %d" % i * 30) for i in range(25)])

        point = agreed_end(
            a.epochs.entries, a.commitlog.write_offset, b.epochs.entries, b.commitlog.write_offset
        )
        assert point == agreed
        report = a.replica.truncate(point, "not on the new master")
        a.epochs.cut(point)
        a.epochs.follow(b.epochs.entries)
        assert report.truncated_at == agreed
        kept = b"".join(Path(path).read_bytes() for path in sorted(report.quarantined))
        assert kept.replace(b"\0", b"") == tail.replace(b"\0", b"")  # set aside, not lost
        a.is_replica = True
        replicate(b, a, rng)
        assert_same(b, a)
    with open_store(tmp_path / "a") as a, open_store(tmp_path / "b") as b:
        assert_same(b, a)  # the cut survives a restart
        assert [e.epoch for e in a.epochs.entries] == [1, 2]


def test_a_replica_behind_the_masters_retention_starts_over(tmp_path: Path) -> None:
    rng = random.Random(5)
    retained = small_settings(retention_hours=1)
    with (
        MessageStore(tmp_path / "master", retained, background=False) as master,
        open_store(tmp_path / "replica") as replica,
    ):
        write(replica, [("stale", 0, b"old" * 100) for _ in range(8)])  # its own, diverged
        write(master, [("orders", i % 3, b"m" * 400) for i in range(40)])
        assert master.run_retention(time.time() + 7200) > 0
        with pytest.raises(ReplicationError, match="outside the log"):
            master.read_log(replica.replica.received_offset, 1000)
        report = replica.replica.restart_at(master.commitlog.min_offset)
        assert report.quarantined
        replicate(master, replica, rng)
        assert_same(master, replica)
    with open_store(tmp_path / "replica") as replica:
        assert replica.commitlog.min_offset > 0
        check_consistency(replica)
