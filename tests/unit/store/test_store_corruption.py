"""Recovery from damaged commit logs: bytes overwritten in the middle of a segment, a flipped
body byte, torn tails, a crash right after a segment roll. Recovery must stop at the last valid
record, say why, keep what it cut in ``quarantine/`` and leave a store that keeps working."""

from __future__ import annotations

import shutil
import struct
import time
from pathlib import Path

import pytest

from reconsume.message.codec import OFF_PHYSICAL_OFFSET, record_size
from reconsume.store import MessageStore, PutResult, StoreSettings

from ._helpers import (
    SEGMENT,
    abandon,
    check_consistency,
    decode,
    forget_checkpoint,
    request,
    small_settings,
)

TOPICS = ("Left", "Right")
HEAD = record_size(0, 0, 0) - 3  # header bytes before the body (IPv4 hosts)


def populate(store: MessageStore, count: int) -> list[tuple[str, int, PutResult]]:
    puts = []
    for i in range(count):
        topic, queue_id = TOPICS[i % 2], i % 3
        result = store.put(request(topic, queue_id, bytes([i % 251]) * (250 + i % 40), tags="t"))
        puts.append((topic, queue_id, result))
    return puts


def segment_path(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEGMENT:020d}"


def patch(root: Path, offset: int, data: bytes) -> None:
    with segment_path(root, offset).open("r+b") as f:
        f.seek(offset % SEGMENT)
        f.write(data)


def contents(store: MessageStore) -> dict[int, bytes]:
    found = {}
    for queue in store.queues:
        got = store.get_messages(queue.topic, queue.queue_id, 0, max_count=10_000)
        for record in got.records:
            found[decode(record).commit_log_offset] = record
    return found


def damage_mid_segment(tmp_path: Path, how: str) -> tuple[MessageStore, int, dict[int, bytes]]:
    """Write records over ~10 segments, damage one in the middle of a middle segment, reopen
    with a full scan (a clean checkpoint would skip the scan) and check what recovery did."""
    settings = small_settings()
    with MessageStore(tmp_path, settings, background=False) as store:
        puts = populate(store, 60)
        before = contents(store)
        segments = [s.start for s in store.commitlog.segments]
    middle = segments[len(segments) // 2]
    in_segment = [r for _t, _q, r in puts if middle <= r.commit_log_offset < middle + SEGMENT]
    assert len(in_segment) >= 3
    victim = in_segment[len(in_segment) // 2]
    at = victim.commit_log_offset
    if how == "body-crc":
        original = segment_path(tmp_path, at).read_bytes()[at % SEGMENT + HEAD + 100]
        patch(tmp_path, at + HEAD + 100, bytes([original ^ 0x01]))
    elif how == "overwrite-middle":
        patch(tmp_path, at + victim.size // 2 - 8, b"\xde\xad\xbe\xef" * 4)
    elif how == "body-length":
        patch(tmp_path, at + HEAD - 4, struct.pack(">i", 0x7FFF0000))
    elif how == "magic":
        patch(tmp_path, at + 4, b"\x00\x00\x00\x01")
    elif how == "topic-bytes":
        patch(tmp_path, at + victim.size - 2 - 4, b"\xff")  # last topic byte
    elif how == "physical-offset":
        patch(tmp_path, at + OFF_PHYSICAL_OFFSET, struct.pack(">q", at + SEGMENT))
    damaged = {p.name: p.read_bytes() for p in (tmp_path / "commitlog").iterdir()}
    forget_checkpoint(tmp_path)
    store = MessageStore(tmp_path, settings, background=False)
    report = store.recovery
    previous = max(r for _t, _q, r in puts if r.commit_log_offset < at)
    assert report.truncated_at == at == previous.commit_log_offset + previous.size
    assert report.end_offset == at == store.commitlog.write_offset
    assert report.truncated_reason is not None
    assert f"record at offset {at}" in report.truncated_reason
    # the cut is set aside, byte for byte: the tail of the damaged segment, then later segments
    quarantine = tmp_path / "quarantine"
    files = sorted(quarantine.iterdir())
    assert [str(p) for p in files] == sorted(report.quarantined)
    tail = [p for p in files if p.name.startswith(f"commitlog-{at:020d}-")]
    assert len(tail) == 1
    cut = tail[0].read_bytes()
    name = f"{middle:020d}"
    assert cut == damaged[name][at % SEGMENT : at % SEGMENT + len(cut)]
    assert damaged[name][at % SEGMENT + len(cut) :].strip(b"\x00") == b""
    assert report.truncated_bytes == len(cut)
    later = [name for name in damaged if int(name) > middle]
    assert later
    for name in later:
        (moved,) = [p for p in files if p.name.startswith(f"commitlog-segment-{name}-")]
        assert moved.read_bytes() == damaged[name]
        assert not (tmp_path / "commitlog" / name).exists()
    assert len(files) == 1 + len(later)
    assert segment_path(tmp_path, at).read_bytes()[at % SEGMENT :].strip(b"\x00") == b""
    # everything before the damage is still there, byte-identical; nothing after it
    kept = {offset: record for offset, record in before.items() if offset < at}
    assert contents(store) == kept
    for topic in TOPICS:
        for queue_id in range(3):
            expected = sum(
                1 for t, q, r in puts if (t, q) == (topic, queue_id) and r.commit_log_offset < at
            )
            assert store.max_offset(topic, queue_id) == expected
    assert check_consistency(store) == len(kept)
    return store, at, kept


def keeps_working(store: MessageStore, at: int, kept: dict[int, bytes]) -> None:
    results = [store.put(request("Left", 0, f"after-{i}".encode() * 30)) for i in range(20)]
    assert results[0].commit_log_offset == at
    assert len(store.commitlog.segments) > 2
    count = check_consistency(store)
    assert count == len(kept) + 20
    root, settings = store.root, store.settings
    store.close()
    with MessageStore(root, settings, background=False) as reopened:
        assert reopened.recovery.records_scanned == 0
        assert reopened.recovery.truncated_at is None
        assert check_consistency(reopened) == count
        last = results[-1]
        record = reopened.read_message(last.commit_log_offset)
        assert record is not None
        assert decode(record).body == b"after-19" * 30


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("body-crc", "CRC"),
        ("overwrite-middle", "CRC"),
        ("body-length", "body length"),
        ("magic", "magic"),
        ("topic-bytes", "UTF-8"),
        ("physical-offset", "physical offset"),
    ],
)
def test_damage_in_the_middle_of_a_segment(tmp_path: Path, how: str, reason: str) -> None:
    store, at, kept = damage_mid_segment(tmp_path, how)
    assert store.recovery.truncated_reason is not None
    assert reason in store.recovery.truncated_reason
    keeps_working(store, at, kept)


def torn_store(tmp_path: Path, settings: StoreSettings) -> tuple[MessageStore, list[PutResult]]:
    store = MessageStore(tmp_path, settings, background=False)
    results = [r for _t, _q, r in populate(store, 12)]
    store.close()
    store = MessageStore(tmp_path, settings, background=False)  # checkpoint at 12 records
    results += [store.put(request("Left", 1, b"z" * (300 + i))) for i in range(5)]
    abandon(store)  # a kill: no checkpoint past the first 12 records
    return store, results


@pytest.mark.parametrize("tear", ["size-missing", "tail-missing", "only-a-header"])
def test_torn_tail_is_cut(tmp_path: Path, tear: str) -> None:
    settings = small_settings()
    _store, results = torn_store(tmp_path, settings)
    last = results[-1]
    at = last.commit_log_offset
    if tear == "size-missing":  # the writer died just before writing totalSize
        patch(tmp_path, at, bytes(4))
    elif tear == "tail-missing":
        patch(tmp_path, at + last.size // 2, bytes(last.size - last.size // 2))
    else:
        patch(tmp_path, at + 48, bytes(last.size - 48))
    with MessageStore(tmp_path, settings, background=False) as store:
        report = store.recovery
        assert not report.clean_shutdown
        assert report.records_scanned == 4
        assert report.truncated_at == at == store.commitlog.write_offset
        assert report.truncated_reason is not None
        if tear == "size-missing":
            assert "partial record" in report.truncated_reason
        assert len(report.quarantined) == 1
        assert Path(report.quarantined[0]).read_bytes().rstrip(b"\x00") != b""
        assert store.max_offset("Left", 1) == 2 + 4  # 2 from populate, 4 whole of the last 5
        assert store.read_message(at) is None
        assert check_consistency(store) == 16
        assert store.put(request("Left", 1, b"again")).commit_log_offset == at
        check_consistency(store)


def test_crash_right_after_a_segment_roll(tmp_path: Path) -> None:
    settings = small_settings()
    store = MessageStore(tmp_path, settings, background=False)
    results = []
    while len(store.commitlog.segments) < 3:
        results.append(store.put(request("Roll", 0, b"r" * 500)))
    last = results[-1]
    assert last.commit_log_offset == 2 * SEGMENT
    abandon(store)
    patch(tmp_path, last.commit_log_offset, bytes(last.size))  # the record never got written
    with MessageStore(tmp_path, settings, background=False) as store:
        report = store.recovery
        assert report.end_offset == 2 * SEGMENT
        assert report.truncated_at is None  # a zero tail is no damage
        assert report.quarantined == []
        assert store.max_offset("Roll", 0) == len(results) - 1
        assert check_consistency(store) == len(results) - 1
        assert store.put(request("Roll", 0, b"next")).commit_log_offset == 2 * SEGMENT
        check_consistency(store)


def test_quarantine_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recoveries that cut at the same offset within one second keep both cuts."""
    monkeypatch.setattr(time, "strftime", lambda *_args: "20250101T000000")
    settings = small_settings()
    cuts = []
    for body in (b"first torn record", b"second torn record"):
        store = MessageStore(tmp_path, settings, background=False)
        result = store.put(request("Torn", 0, body))
        abandon(store)
        patch(tmp_path, result.commit_log_offset, bytes(4))
        with MessageStore(tmp_path, settings, background=False) as store:
            assert store.recovery.truncated_at == 0
            cuts += store.recovery.quarantined
    assert len(set(cuts)) == 2
    assert b"first torn record" in Path(cuts[0]).read_bytes()
    assert b"second torn record" in Path(cuts[1]).read_bytes()


def queue_offsets(store: MessageStore, topic: str) -> dict[int, tuple[int, int]]:
    return {q: (store.min_offset(topic, q), store.max_offset(topic, q)) for q in (0, 1)}


def test_lost_consume_queues_are_rebuilt_from_the_log(tmp_path: Path) -> None:
    settings = small_settings(retention_hours=1)
    with MessageStore(tmp_path, settings, background=False) as store:
        for i in range(40):
            store.put(request("Rebuilt", i % 2, bytes([i]) * 300))
        store.run_retention(now_s=time.time() + 7200)
        offsets = queue_offsets(store, "Rebuilt")
        assert all(low > 0 for low, _high in offsets.values())
        before = contents(store)
    shutil.rmtree(tmp_path / "consumequeue")
    forget_checkpoint(tmp_path)
    with MessageStore(tmp_path, settings, background=False) as store:
        assert store.recovery.anomalies == []
        assert queue_offsets(store, "Rebuilt") == offsets
        assert contents(store) == before
        store.put(request("Rebuilt", 0, b"next"))
        check_consistency(store)
    with MessageStore(tmp_path, settings, background=False) as store:
        assert store.max_offset("Rebuilt", 0) == offsets[0][1] + 1
        check_consistency(store)
