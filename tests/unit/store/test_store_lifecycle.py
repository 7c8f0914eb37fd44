"""Opening and closing, the directory lock, topic deletion, retention, a custom tag-code hook,
and durability under Sync flush (put_async, group commit across threads)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from reconsume.errors import StoreClosedError, StoreError
from reconsume.message import properties as props
from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.store import FlushMode, GetStatus, MessageStore, PutRequest, default_tags_code
from reconsume.store.mapped_file import MappedFile

from ._helpers import (
    SEGMENT,
    abandon,
    check_consistency,
    decode,
    forget_checkpoint,
    request,
    small_settings,
)

HOUR = 3600.0


def fill(store: MessageStore, topic: str, count: int, queues: int = 2, size: int = 300) -> None:
    for i in range(count):
        store.put(request(topic, i % queues, f"{topic}-{i}".encode().ljust(size, b"~")))


def snapshot(store: MessageStore) -> dict[tuple[str, int], tuple[int, int, list[bytes]]]:
    state = {}
    for queue in store.queues:
        key = (queue.topic, queue.queue_id)
        got = store.get_messages(*key, queue.min_offset, max_count=10_000, max_bytes=1 << 30)
        state[key] = (queue.min_offset, queue.max_offset, got.records)
    return state


def test_clean_close_reopens_without_scanning(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings()) as store:
        fill(store, "Kept", 30, queues=3)
        fill(store, "Other", 7)
        before = snapshot(store)
        end = store.commitlog.write_offset
    with MessageStore(tmp_path, small_settings()) as store:
        report = store.recovery
        assert report.clean_shutdown
        assert (report.scan_start, report.end_offset, report.checkpoint_offset) == (end, end, end)
        assert (report.records_scanned, report.bytes_scanned, report.entries_dropped) == (0, 0, 0)
        assert report.truncated_at is None
        assert report.quarantined == []
        assert report.anomalies == []
        assert snapshot(store) == before
        assert store.put(request("Kept", 0, b"after")).queue_offset == 10
        check_consistency(store)
    assert not (tmp_path / "quarantine").exists()


def test_a_second_open_fails_while_the_store_is_open(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_settings())
    with pytest.raises(StoreError, match="in use"):
        MessageStore(tmp_path, small_settings())
    store.put(request("Still", 0, b"works"))
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        store.put(request("Still", 0, b"closed"))
    with pytest.raises(StoreClosedError):
        store.get_messages("Still", 0, 0)
    with MessageStore(tmp_path, small_settings()) as reopened:
        assert decode(reopened.get_messages("Still", 0, 0).records[0]).body == b"works"


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "killed"])
def test_deleted_topic_stays_deleted(tmp_path: Path, crash: bool) -> None:
    store = MessageStore(tmp_path, small_settings(), background=False)
    fill(store, "Doomed", 12, queues=3)
    fill(store, "Survivor", 5)
    assert store.delete_topic("Doomed") == 3
    deleted_at = store.commitlog.write_offset
    assert store.queue_ids("Doomed") == []
    assert store.get_messages("Doomed", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    fill(store, "Survivor", 5)
    if crash:
        abandon(store)
    else:
        store.close()
    with MessageStore(tmp_path, small_settings(), background=False) as store:
        assert store.queue_ids("Doomed") == []
        assert not (tmp_path / "consumequeue" / "Doomed").exists()
        assert (store.max_offset("Survivor", 0), store.max_offset("Survivor", 1)) == (6, 4)
        assert store.put(request("Doomed", 1, b"reborn")).queue_offset == 0
        check_consistency(store, deleted={"Doomed": deleted_at})


def age(store: MessageStore, count: int, now: float, hours: float) -> None:
    """Make the first ``count`` segments look last written ``hours`` ago."""
    stamp = now - hours * HOUR
    for segment in store.commitlog.segments[:count]:
        os.utime(segment.path, (stamp, stamp))


def test_retention_deletes_old_segments_and_min_offsets_follow(tmp_path: Path) -> None:
    settings = small_settings(retention_hours=10)
    store = MessageStore(tmp_path, settings, background=False)
    fill(store, "Quiet", 6, queues=1)  # every record of this topic will age out
    fill(store, "Busy", 60, queues=2)
    now = time.time()
    segments = list(store.commitlog.segments)
    assert len(segments) > 8
    age(store, len(segments), now, hours=1)
    age(store, 5, now, hours=11)
    assert store.run_retention(now_s=now) == 5
    assert store.commitlog.min_offset == segments[5].start
    assert min((tmp_path / "commitlog").iterdir()) == segments[5].path
    assert all(not s.path.exists() for s in segments[:5])
    assert (store.min_offset("Quiet", 0), store.max_offset("Quiet", 0)) == (6, 6)
    for queue_id in (0, 1):
        low = store.min_offset("Busy", queue_id)
        assert 0 < low < 30
        phys = [e[0] for e in store.queue_entries("Busy", queue_id, low, 1)]
        assert phys[0] >= store.commitlog.min_offset
        small = store.get_messages("Busy", queue_id, low - 1)
        assert (small.status, small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
        assert store.get_messages("Busy", queue_id, low).queue_offsets[0] == low
    assert store.read_message(segments[0].start) is None
    before = snapshot(store)
    # the active segment is never deleted, however old
    remaining = len(store.commitlog.segments)
    age(store, remaining, now, hours=100)
    assert store.run_retention(now_s=now) == remaining - 1
    assert store.commitlog.min_offset == segments[-1].start
    after = snapshot(store)
    store.close()
    with MessageStore(tmp_path, settings, background=False) as store:
        assert snapshot(store) == after != before
        assert store.max_offset("Quiet", 0) == 6  # offsets never go back, even after a restart
        assert store.put(request("Quiet", 0, b"late")).queue_offset == 6
        check_consistency(store)
    forget_checkpoint(tmp_path)  # a full scan must keep the aged-out entries too
    with MessageStore(tmp_path, settings, background=False) as store:
        assert store.recovery.scan_start == segments[-1].start
        assert (store.min_offset("Quiet", 0), store.max_offset("Quiet", 0)) == (6, 7)
        for queue_id in (0, 1):
            assert store.max_offset("Busy", queue_id) == 30
        check_consistency(store)


SCHEDULE_DELAY = "DELAY_MS"


def due_time_tags_code(topic: str, properties: str, store_timestamp_ms: int) -> int:
    """The schedule topic keeps a message's due time where other topics keep a tag hash."""
    if topic == SCHEDULE_TOPIC:
        delay = props.find_property(properties, SCHEDULE_DELAY)
        return store_timestamp_ms + int(delay or 0)
    return default_tags_code(topic, properties, store_timestamp_ms)


def test_custom_tags_code_is_stored_and_recomputed_by_recovery(tmp_path: Path) -> None:
    settings = small_settings()
    store = MessageStore(tmp_path, settings, tags_code=due_time_tags_code, background=False)
    expected = {}
    for i in range(20):
        topic = SCHEDULE_TOPIC if i % 3 else "Plain"
        req = request(topic, i % 2, b"x" * 50, tags=f"t{i % 4}", extra={SCHEDULE_DELAY: str(i)})
        result = store.put(req)
        expected[(topic, i % 2, result.queue_offset)] = due_time_tags_code(
            topic, req.properties, result.store_timestamp_ms
        )

    def tag_codes(store: MessageStore) -> dict[tuple[str, int, int], int]:
        codes = {}
        for queue in store.queues:
            for index in range(queue.min_offset, queue.max_offset):
                entry = queue.entry(index)
                assert entry is not None
                codes[(queue.topic, queue.queue_id, index)] = entry[2]
        return codes

    assert tag_codes(store) == expected
    assert store.get_messages(SCHEDULE_TOPIC, 1, 0).records  # the hook does not hide records
    abandon(store)
    forget_checkpoint(tmp_path)  # every entry is rebuilt from the log
    with MessageStore(tmp_path, settings, tags_code=due_time_tags_code) as store:
        assert store.recovery.entries_dispatched == 20
        assert tag_codes(store) == expected
        check_consistency(store)


def test_put_async_waits_for_the_group_commit(tmp_path: Path) -> None:
    settings = small_settings(flush_mode=FlushMode.SYNC)

    async def produce(store: MessageStore) -> list[int]:
        results = await asyncio.gather(
            *(store.put_async(request("Async", i % 4, b"a" * (i * 20))) for i in range(40))
        )
        for result in results:
            assert store.group_commit.flushed >= result.commit_log_offset + result.size
        return [r.queue_offset for r in results]

    with MessageStore(tmp_path, settings) as store:
        offsets = asyncio.run(produce(store))
        assert sorted(offsets) == sorted(list(range(10)) * 4)
        assert sum(store.max_offset("Async", q) for q in range(4)) == 40
        check_consistency(store)


def test_concurrent_sync_puts_share_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flushes = []
    real_flush = MappedFile.flush

    def counting_flush(self: MappedFile) -> None:
        if self.path.parent.name == "commitlog":
            flushes.append(self.start)
            time.sleep(0.005)  # a disk that takes a while, so puts pile up behind an fsync
        real_flush(self)

    monkeypatch.setattr(MappedFile, "flush", counting_flush)
    threads, per_thread = 8, 25
    errors: list[BaseException] = []
    start = threading.Barrier(threads)
    results: dict[int, list[tuple[int, int, int]]] = {}
    with MessageStore(tmp_path, small_settings(flush_mode=FlushMode.SYNC)) as store:
        flushes.clear()

        def worker(n: int) -> None:
            try:
                start.wait(timeout=10)
                mine = results.setdefault(n, [])
                for i in range(per_thread):
                    result = store.put(request("Group", n % 4, f"{n}:{i}".encode()), timeout_s=30)
                    assert store.group_commit.flushed >= result.commit_log_offset + result.size
                    mine.append((n % 4, result.queue_offset, i))
            except BaseException as exc:
                errors.append(exc)

        pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=60)
        assert not errors
        puts = threads * per_thread
        assert sum(len(v) for v in results.values()) == puts
        assert 0 < len(flushes) <= puts // 2, f"{len(flushes)} fsyncs for {puts} puts"
        for n, mine in results.items():
            for queue_id, queue_offset, i in mine:
                got = store.get_messages("Group", queue_id, queue_offset, max_count=1)
                assert decode(got.records[0]).body == f"{n}:{i}".encode()
        check_consistency(store)


def test_puts_of_a_batch_are_contiguous_and_durable(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings(flush_mode=FlushMode.SYNC)) as store:
        batch = [PutRequest("Batch", 0, bytes([i]) * 400) for i in range(12)]
        results = store.put_batch(batch)
        assert [r.queue_offset for r in results] == list(range(12))
        assert store.group_commit.flushed >= results[-1].commit_log_offset + results[-1].size
        assert results[-1].commit_log_offset > SEGMENT  # the batch rolled segments
        assert store.put_batch([]) == []
        check_consistency(store)


def test_a_failed_fsync_makes_the_store_read_only_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a failed fdatasync the kernel may have dropped the dirty pages, so no later
    # fsync can prove earlier bytes durable: the store must stop accepting writes.
    real_flush = MappedFile.flush
    failures = [OSError(5, "injected EIO")]

    def flaky_flush(self: MappedFile) -> None:
        if failures and self.path.parent.name == "commitlog":
            raise failures.pop()
        real_flush(self)

    with MessageStore(tmp_path, small_settings(flush_mode=FlushMode.SYNC)) as store:
        monkeypatch.setattr(MappedFile, "flush", flaky_flush)
        with pytest.raises(StoreError, match="injected EIO"):
            store.put(request("Disk", 0, b"unlucky"), timeout_s=30)
        with pytest.raises(StoreError, match="read-only"):
            store.put(request("Disk", 0, b"refused"), timeout_s=30)
        with pytest.raises(StoreError, match="read-only"):
            store.durable(store.commitlog.write_offset + 1).result(timeout=30)
        assert store.get_messages("Disk", 0, 0).records  # reads still work
    monkeypatch.setattr(MappedFile, "flush", real_flush)
    with MessageStore(tmp_path, small_settings(flush_mode=FlushMode.SYNC)) as store:
        result = store.put(request("Disk", 0, b"lucky"), timeout_s=30)
        assert result.queue_offset == 1  # the unacknowledged put reached the page cache
        check_consistency(store)


def test_sync_put_without_a_background_thread_flushes_itself(tmp_path: Path) -> None:
    settings = small_settings(flush_mode=FlushMode.SYNC)
    with MessageStore(tmp_path, settings, background=False) as store:
        result = store.put(request("Inline", 0, b"x"), timeout_s=10)
        assert store.group_commit.flushed >= result.end_offset


def test_close_during_sync_puts_neither_hangs_nor_loses_them(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_settings(flush_mode=FlushMode.SYNC))
    done: dict[int, int] = {}
    unexpected: list[BaseException] = []

    def writer(queue_id: int) -> None:
        count = 0
        try:
            while True:
                store.put(request("Closing", queue_id, b"c" * 100), timeout_s=30)
                count += 1
                done[queue_id] = count
        except StoreClosedError:
            pass
        except BaseException as exc:
            unexpected.append(exc)

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in pool:
        thread.start()
    deadline = time.monotonic() + 30
    while sum(done.values()) < 100 and time.monotonic() < deadline and not unexpected:
        time.sleep(0.001)  # polls the writers' progress, with a deadline
    store.close()
    for thread in pool:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in pool)
    assert not unexpected
    assert sum(done.values()) >= 100
    with MessageStore(tmp_path, small_settings()) as store:
        assert store.recovery.clean_shutdown
        for queue_id, count in done.items():
            assert store.max_offset("Closing", queue_id) >= count
        check_consistency(store)
