"""Puts and reads: topics and queues, segment and consume-queue rolling, blank records, tag
filtering, every GetStatus, read limits, reads by offset and by time, rejected puts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.errors import InvalidArgumentError, InvalidNameError, MessageTooLargeError
from reconsume.message.codec import BLANK_MAGIC_CODE, record_size
from reconsume.message.tags import tags_code
from reconsume.store import GetStatus, MessageStore, PutRequest

from ._helpers import (
    SEGMENT,
    abandon,
    check_consistency,
    decode,
    request,
    small_settings,
    walk_commit_log,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    with MessageStore(tmp_path / "store", small_settings(), background=False) as opened:
        yield opened


def body(topic: str, queue_id: int, i: int, size: int = 40) -> bytes:
    return f"{topic}/{queue_id}/{i}:".encode().ljust(size, b".")


def test_put_and_get_across_topics_and_queues(store: MessageStore) -> None:
    topics = ["TopicA", "%RETRY%group-1", "T|b_c-9"]
    last_phys = -1
    for i in range(6):
        for topic in topics:
            for queue_id in range(4):
                result = store.put(request(topic, queue_id, body(topic, queue_id, i), keys=f"k{i}"))
                assert result.queue_offset == i
                assert result.commit_log_offset > last_phys
                last_phys = result.commit_log_offset
    for topic in topics:
        assert store.queue_ids(topic) == [0, 1, 2, 3]
        for queue_id in range(4):
            assert (store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)) == (0, 6)
            got = store.get_messages(topic, queue_id, 0, max_count=100)
            assert got.status is GetStatus.FOUND
            assert (got.next_begin_offset, got.min_offset, got.max_offset) == (6, 0, 6)
            assert got.queue_offsets == list(range(6))
            messages = [decode(record) for record in got.records]
            assert [m.body for m in messages] == [body(topic, queue_id, i) for i in range(6)]
            assert all((m.topic, m.queue_id) == (topic, queue_id) for m in messages)
            assert [m.keys for m in messages] == [[f"k{i}"] for i in range(6)]
            assert got.total_bytes == sum(len(r) for r in got.records)
    assert check_consistency(store) == 6 * 3 * 4


def test_segments_roll_and_reads_cross_them(store: MessageStore) -> None:
    sizes = [(i * 137) % 800 for i in range(80)]
    results = [store.put(request("Roll", i % 2, bytes([i]) * n)) for i, n in enumerate(sizes)]
    segments = store.commitlog.segments
    assert len(segments) > 20
    assert [s.start for s in segments] == [i * SEGMENT for i in range(len(segments))]
    names = sorted(p.name for p in (store.root / "commitlog").iterdir())
    assert names == [f"{i * SEGMENT:020d}" for i in range(len(segments))]
    for result in results:  # a record never spans two segments
        start = result.commit_log_offset
        assert start // SEGMENT == (start + result.size) // SEGMENT
    records, blanks = walk_commit_log(store)
    assert [w.offset for w in records] == [r.commit_log_offset for r in results]
    assert len(blanks) == len(segments) - 1  # every segment but the active one ends in a blank
    for blank in blanks:
        assert store.read_message(blank) is None
    for queue_id in (0, 1):
        got = store.get_messages("Roll", queue_id, 0, max_count=1000, max_bytes=1 << 30)
        expected = [bytes([i]) * n for i, n in enumerate(sizes) if i % 2 == queue_id]
        assert [decode(r).body for r in got.records] == expected
    check_consistency(store)


def test_blank_record_closes_a_segment_exactly(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings(max_message_bytes=SEGMENT - 8)) as store:
        check_blank_records(store)


def check_blank_records(store: MessageStore) -> None:
    overhead = record_size(0, len("Edge"), 0)
    first = store.put(PutRequest("Edge", 0, b"a" * 500))
    # a record that leaves exactly the 8 bytes a blank needs still fits
    fill = SEGMENT - first.size - 8 - overhead
    second = store.put(PutRequest("Edge", 0, b"b" * fill))
    assert second.commit_log_offset == first.size
    assert second.commit_log_offset + second.size == SEGMENT - 8
    third = store.put(PutRequest("Edge", 0, b"c"))
    assert third.commit_log_offset == SEGMENT
    assert store.commitlog.header(SEGMENT - 8) == (8, BLANK_MAGIC_CODE)
    # one byte more than fits: the blank takes the rest of the segment
    fourth = store.put(PutRequest("Edge", 0, b"d" * (SEGMENT - third.size - overhead - 7)))
    assert fourth.commit_log_offset == 2 * SEGMENT
    assert store.commitlog.header(third.commit_log_offset + third.size) == (
        SEGMENT - third.size,
        BLANK_MAGIC_CODE,
    )
    got = store.get_messages("Edge", 0, 0, max_count=10, max_bytes=1 << 20)
    assert [len(decode(r).body) for r in got.records] == [500, fill, 1, fourth.size - overhead]
    check_consistency(store)


def test_consume_queue_files_roll(tmp_path: Path) -> None:
    settings = small_settings(consume_queue_entries_per_file=4)
    with MessageStore(tmp_path, settings, background=False) as store:
        for i in range(11):
            store.put(request("Rolling", 3, body("Rolling", 3, i)))
        directory = tmp_path / "consumequeue" / "Rolling" / "3"
        assert sorted(p.name for p in directory.iterdir()) == [f"{i:020d}" for i in (0, 4, 8)]
        got = store.get_messages("Rolling", 3, 2, max_count=100)
        assert got.queue_offsets == list(range(2, 11))
        assert len(store.queue_entries("Rolling", 3, 1, 100)) == 3  # one file at a time
        assert len(store.queue_entries("Rolling", 3, 8, 100)) == 3
    with MessageStore(tmp_path, settings, background=False) as store:
        assert store.max_offset("Rolling", 3) == 11
        got = store.get_messages("Rolling", 3, 0, max_count=100)
        assert [decode(r).body for r in got.records] == [body("Rolling", 3, i) for i in range(11)]
        assert store.put(request("Rolling", 3, b"next")).queue_offset == 11
        check_consistency(store)


def test_tag_filter(store: MessageStore) -> None:
    tags = ["TagA", "TagB", None, "TagA", "TagC", "TagA"]
    for i, tag in enumerate(tags):
        store.put(request("Tagged", 0, body("Tagged", 0, i), tags=tag))
    entries = store.queue_entries("Tagged", 0, 0, 100) + store.queue_entries("Tagged", 0, 4, 100)
    assert [tag for _phys, _size, tag in entries] == [tags_code(t) for t in tags]
    got = store.get_messages("Tagged", 0, 0, tag_codes={tags_code("TagA")})
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == [0, 3, 5]
    assert all(decode(r).tags == "TagA" for r in got.records)
    got = store.get_messages("Tagged", 0, 1, tag_codes={tags_code("TagB"), tags_code("TagC")})
    assert got.queue_offsets == [1, 4]
    assert got.next_begin_offset == 6
    got = store.get_messages("Tagged", 0, 0, max_count=2, tag_codes={tags_code("TagA")})
    assert (got.queue_offsets, got.next_begin_offset) == ([0, 3], 4)
    missing = store.get_messages("Tagged", 0, 1, tag_codes={tags_code("Nope")})
    assert missing.status is GetStatus.NO_MATCHED_MESSAGE
    assert (missing.records, missing.next_begin_offset) == ([], 6)


def test_every_get_status(tmp_path: Path) -> None:
    settings = small_settings()
    store = MessageStore(tmp_path, settings, background=False)
    lonely = store.put(request("Lonely", 0, b"only message"))
    abandon(store)  # killed before the record's totalSize was written:
    path = tmp_path / "commitlog" / f"{0:020d}"
    with path.open("r+b") as f:
        f.seek(lonely.commit_log_offset)
        f.write(bytes(4))
    store = MessageStore(tmp_path, settings, background=False)
    try:
        empty = store.get_messages("Lonely", 0, 0)
        assert (empty.status, empty.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
        none = store.get_messages("Nowhere", 0, 0)
        assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        assert store.get_messages("Lonely", 1, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        for i in range(2):
            store.put(request("Gone", 0, body("Gone", 0, i)))
        for i in range(40):
            store.put(request("Busy", 0, body("Busy", 0, i, 300), tags="x"))
        found = store.get_messages("Busy", 0, 5, max_count=2)
        assert (found.status, found.next_begin_offset, found.queue_offsets) == (
            GetStatus.FOUND,
            7,
            [5, 6],
        )
        one = store.get_messages("Busy", 0, 40)
        assert (one.status, one.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 40)
        badly = store.get_messages("Busy", 0, 41)
        assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 0)
        unmatched = store.get_messages("Busy", 0, 10, tag_codes={tags_code("y")})
        assert (unmatched.status, unmatched.next_begin_offset) == (
            GetStatus.NO_MATCHED_MESSAGE,
            40,
        )
        # retention's first step removes a segment; a reader between it and the step that
        # moves the queues' minimum sees entries whose records are gone
        first = store.commitlog.segments[0]
        store.commitlog.drop_first().delete()
        removing = store.get_messages("Gone", 0, 0)
        assert removing.status is GetStatus.MESSAGE_WAS_REMOVING
        assert (removing.records, removing.next_begin_offset) == ([], 2)
        skipping = store.get_messages("Busy", 0, 0, max_count=2)  # steps over removed entries
        low = skipping.queue_offsets[0]
        assert low > 0
        assert skipping.queue_offsets == [low, low + 1]
        for queue in store.queues:
            queue.drop_files_below(store.commitlog.min_offset)
        assert store.min_offset("Busy", 0) == low
        assert (store.min_offset("Gone", 0), store.max_offset("Gone", 0)) == (2, 2)
        entry = store.queue_entries("Busy", 0, low - 1, 1)
        assert entry == [] or entry[0][0] < first.end
        assert store.queue_entries("Busy", 0, low, 1)[0][0] >= first.end
        small = store.get_messages("Busy", 0, 0)
        assert (small.status, small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
        gone = store.get_messages("Gone", 0, 0)
        assert (gone.status, gone.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 2)
        assert store.get_messages("Gone", 0, 2).status is GetStatus.OFFSET_OVERFLOW_ONE
        badly = store.get_messages("Busy", 0, 99)
        assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 40)
        assert store.get_messages("Busy", 0, low).queue_offsets[0] == low
    finally:
        store.close()


def test_max_count_and_max_bytes(store: MessageStore) -> None:
    sizes = [store.put(request("Limits", 0, body("Limits", 0, i, 100))).size for i in range(10)]
    got = store.get_messages("Limits", 0, 0, max_count=3)
    assert (got.queue_offsets, got.next_begin_offset) == ([0, 1, 2], 3)
    got = store.get_messages("Limits", 0, 4, max_bytes=sizes[0] * 2 + sizes[0] // 2)
    assert (got.queue_offsets, got.next_begin_offset) == ([4, 5], 6)
    assert got.total_bytes == sizes[4] + sizes[5]
    got = store.get_messages("Limits", 0, 4, max_bytes=1)  # the first record always comes
    assert (got.queue_offsets, got.next_begin_offset) == ([4], 5)
    got = store.get_messages("Limits", 0, 7, max_count=100)
    assert (got.queue_offsets, got.next_begin_offset) == ([7, 8, 9], 10)


def test_read_message_by_offset(store: MessageStore) -> None:
    results = [store.put(request("ByOffset", 0, bytes([i]) * 700)) for i in range(6)]
    got = store.get_messages("ByOffset", 0, 0, max_count=10, max_bytes=1 << 20)
    for result, record in zip(results, got.records, strict=True):
        assert store.read_message(result.commit_log_offset) == record
        assert decode(record).commit_log_offset == result.commit_log_offset
        assert store.read_message(result.commit_log_offset + 1) is None
        assert store.read_message(result.commit_log_offset + 4) is None
    end = results[-1].commit_log_offset + results[-1].size
    assert store.read_message(end) is None
    assert store.read_message(end + 10 * SEGMENT) is None
    assert store.read_message(-1) is None


def wait_for_next_ms(after_ms: int) -> None:
    while time.time_ns() // 1_000_000 <= after_ms:  # spins at most a millisecond
        pass


def test_offset_by_time(store: MessageStore) -> None:
    stamps = []
    for i in range(8):
        result = store.put(request("Timed", 0, body("Timed", 0, i)))
        stamps.append(result.store_timestamp_ms)
        wait_for_next_ms(result.store_timestamp_ms)
    assert stamps == sorted(set(stamps))
    for i, stamp in enumerate(stamps):
        assert store.offset_by_time("Timed", 0, stamp) == i
        assert store.offset_by_time("Timed", 0, stamp + 1) == i + 1
        message = decode(store.get_messages("Timed", 0, i, max_count=1).records[0])
        assert message.store_timestamp_ms == stamp
    assert store.offset_by_time("Timed", 0, 0) == 0
    assert store.offset_by_time("Timed", 0, stamps[-1] + 10_000) == 8
    assert store.offset_by_time("Unknown", 0, stamps[0]) == 0


def test_rejected_puts_write_nothing(store: MessageStore) -> None:
    store.put(request("Fine", 0, b"first"))
    before = store.commitlog.write_offset
    too_big = 1024 - record_size(0, len("Fine"), 0) + 1
    store.put(PutRequest("Fine", 0, b"x" * (too_big - 1)))  # exactly the limit
    before = store.commitlog.write_offset
    with pytest.raises(MessageTooLargeError):
        store.put(PutRequest("Fine", 0, b"x" * too_big))
    with pytest.raises(MessageTooLargeError):
        store.put(request("Fine", 0, b"", extra={"P": "v" * 40_000}))
    for name in ["", "has space", "a/b", "../up", "x" * 128, "bad\n", "ünïcode", "a.b"]:
        with pytest.raises(InvalidNameError):
            store.put(PutRequest(name, 0, b"body"))
    for queue_id in (-1, 1 << 31):
        with pytest.raises(InvalidArgumentError):
            store.put(PutRequest("Fine", queue_id, b"body"))
    with pytest.raises(MessageTooLargeError):  # one bad request rejects the whole batch
        store.put_batch([PutRequest("Fine", 0, b"ok"), PutRequest("Fine", 0, b"x" * too_big)])
    assert store.commitlog.write_offset == before
    assert store.max_offset("Fine", 0) == 2
    assert store.queues.topics() == {"Fine"}
    check_consistency(store)
