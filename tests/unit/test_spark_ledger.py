"""The dead-letter jobs' ledger, pure: entries round-trip through their JSON bodies, a re-run's
resume points follow from the entries an earlier attempt wrote, and the message ids a job
gives its sends are the same on every attempt."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import InvalidArgumentError
from reconsume.spark import ledger
from reconsume.spark.ledger import (
    ARCHIVED,
    ARCHIVING,
    SENDING,
    SENT,
    STARTED,
    Entry,
    Resume,
    TargetMark,
    archived_ranges,
    last_archive_entry,
    last_started,
    message_key,
    message_keys,
    resume_points,
    scope_data,
)
from reconsume.spark.offsets import QueueKey

JOB = "reprocess-orders"
A0, A1, B0 = QueueKey("broker-a", 0), QueueKey("broker-a", 1), QueueKey("broker-b", 0)
T1 = TargetMark("orders", "broker-a", 0, 100)
T2 = TargetMark("orders", "broker-b", 1, 7)
KINDS = (STARTED, SENDING, SENT, ARCHIVING, ARCHIVED)

offsets = st.integers(min_value=0, max_value=2**62)
# Names as brokers and jobs have them: UTF-8, no NUL (message_key joins its parts with NUL).
names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
queue_keys = st.builds(QueueKey, names, st.integers(min_value=0, max_value=2**31 - 1))
target_marks = st.builds(TargetMark, names, names, st.integers(0, 2**31 - 1), offsets)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
entries = st.builds(
    Entry,
    job=st.text(),
    kind=st.sampled_from(KINDS),
    queue=queue_keys,
    start=offsets,
    end=offsets,
    targets=st.lists(target_marks, max_size=4).map(tuple),
    data=st.dictionaries(st.text(), json_scalars, max_size=5),
)


def sending(start: int, end: int, *targets: TargetMark, queue: QueueKey = A0) -> Entry:
    return Entry(JOB, SENDING, queue, start, end, targets)


def sent(end: int, queue: QueueKey = A0) -> Entry:
    return Entry(JOB, SENT, queue, end, end)


# ------------------------------------------------------------------ entries


@given(entries)
def test_an_entry_round_trips_through_its_json_body(entry: Entry) -> None:
    body = entry.to_json()
    assert Entry.from_json(body) == entry
    # Canonical: the same entry always has the same body.
    assert Entry.from_json(body).to_json() == body
    assert json.loads(body)["queue"] == f"{entry.queue.broker}:{entry.queue.queue_id}"


@given(entries)
def test_a_resume_round_trips_through_its_dict(entry: Entry) -> None:
    for resume in (Resume(entry.start), Resume(entry.end, entry)):
        data = json.loads(json.dumps(resume.to_dict()))
        assert Resume.from_dict(data) == resume


def test_a_resume_dict_names_done_and_the_pending_entry() -> None:
    pending = sending(10, 20, T1)
    assert Resume(10, pending).to_dict() == {
        "done": 10,
        "pending": {
            "job": JOB,
            "kind": SENDING,
            "queue": "broker-a:0",
            "start": 10,
            "end": 20,
            "targets": [{"topic": "orders", "broker": "broker-a", "queueId": 0, "offset": 100}],
            "data": {},
        },
    }
    assert Resume(3).to_dict() == {"done": 3, "pending": None}
    assert Resume.from_dict({"done": "3"}) == Resume(3)


def test_a_target_mark_round_trips_and_sorts_by_its_fields() -> None:
    assert TargetMark.from_dict(T1.to_dict()) == T1
    assert sorted([T2, T1]) == [T1, T2]


@pytest.mark.parametrize("kind", ["", "Sending", "deleted", "sent "])
def test_an_unknown_kind_is_refused(kind: str) -> None:
    with pytest.raises(InvalidArgumentError, match="ledger entry kind"):
        Entry(JOB, kind, A0, 0, 1)
    body = json.dumps({"job": JOB, "kind": kind, "queue": "broker-a:0", "start": 0, "end": 1})
    with pytest.raises(InvalidArgumentError, match="ledger entry kind"):
        Entry.from_json(body.encode())


def test_an_entry_without_targets_or_data_reads_as_empty() -> None:
    body = json.dumps({"job": JOB, "kind": SENT, "queue": "broker-a:0", "start": 4, "end": 4})
    assert Entry.from_json(body.encode()) == sent(4)


# ------------------------------------------------------------------ resume points


def test_a_batch_sent_and_marked_leaves_nothing_pending() -> None:
    points = resume_points([sending(0, 10, T1), sent(10)], JOB, {A0: 0})
    assert points == {A0: Resume(10)}


def test_an_unmarked_batch_is_pending_after_the_one_before_it() -> None:
    first, second = sending(0, 10, T1), sending(10, 20, T1)
    points = resume_points([first, second], JOB, {A0: 0})
    # The second sending was written only once the first batch was sent.
    assert points == {A0: Resume(10, second)}


def test_a_re_runs_sending_carries_the_crashed_attempts_targets() -> None:
    crashed = sending(0, 10, T1)
    # The re-run found offsets 0..3 at T1 and sends the rest, possibly to another queue.
    re_run = sending(4, 10, T1, T2)
    points = resume_points([crashed, re_run], JOB, {A0: 0})
    assert points == {A0: Resume(4, re_run)}
    pending = points[A0].pending
    assert pending is not None
    assert set(pending.targets) == {T1, T2}
    # Marked sent at last: done.
    assert resume_points([crashed, re_run, sent(10)], JOB, {A0: 0}) == {A0: Resume(10)}


def test_queues_are_resumed_independently() -> None:
    written = [sending(0, 5, T1), sending(0, 8, T2, queue=B0), sent(5), sending(8, 9, queue=B0)]
    assert resume_points(written, JOB, {A0: 0, B0: 0}) == {
        A0: Resume(5),
        B0: Resume(8, sending(8, 9, queue=B0)),
    }


def test_entries_of_other_jobs_and_archive_kinds_are_ignored() -> None:
    other = Entry("drain-orders", SENDING, A0, 0, 10, (T1,))
    archive = [
        Entry(JOB, STARTED, A0, 0, 50),
        Entry(JOB, ARCHIVING, A0, 0, 50, data={"run": "r1"}),
        Entry(JOB, ARCHIVED, A0, 0, 50, data={"count": 50}),
    ]
    assert resume_points([other, *archive], JOB, {A0: 0}) == {}
    assert resume_points([other, sending(0, 3), *archive], JOB, {A0: 0}) == {
        A0: Resume(0, sending(0, 3))
    }


def test_entries_of_finished_runs_are_ignored() -> None:
    finished = [sending(0, 10, T1), sent(10), sending(10, 20, T1), sent(20)]
    # The offsets were committed at 20: the run that wrote these finished.
    assert resume_points(finished, JOB, {A0: 20}) == {}
    # Its entries are skipped, the next run's are not.
    assert resume_points([*finished, sending(20, 25, T2)], JOB, {A0: 20}) == {
        A0: Resume(20, sending(20, 25, T2))
    }
    # A queue without a committed offset: every entry counts.
    assert resume_points(finished, JOB, {}) == {A0: Resume(20)}


def test_a_sent_mark_after_skipped_rows_moves_done_past_a_pending_batch() -> None:
    # The re-run found the whole pending batch at its targets and marked the queue sent.
    points = resume_points([sending(0, 10, T1), sent(10)], JOB, {})
    assert points[A0].pending is None


# ------------------------------------------------------------------ other readers


def test_last_started_and_last_archive_entry() -> None:
    first = Entry(JOB, STARTED, A0, 0, 10)
    second = Entry(JOB, STARTED, A0, 0, 12)
    archiving = Entry(JOB, ARCHIVING, A0, 0, 12, data={"run": "r2"})
    archived = Entry(JOB, ARCHIVED, A0, 0, 12, data={"run": "r2", "count": 12})
    foreign = [Entry("other", STARTED, A0, 0, 99), Entry("other", ARCHIVED, A0, 0, 99)]
    written = [first, sending(0, 4), second, archiving, sent(4), *foreign]

    assert last_started(written, JOB) is second
    assert last_archive_entry(written, JOB) is archiving
    assert last_archive_entry([*written, archived, *foreign], JOB) is archived
    assert last_started([sending(0, 1), *foreign], JOB) is None
    assert last_archive_entry([first, sent(1)], JOB) is None
    assert last_started([], JOB) is None


@given(
    st.dictionaries(queue_keys, st.tuples(offsets, offsets), max_size=6),
    st.integers(min_value=0),
    st.text(),
)
def test_scope_data_round_trips_through_an_archived_entry(
    ranges: dict[QueueKey, tuple[int, int]], count: int, path: str
) -> None:
    data = scope_data([(k, s, e) for k, (s, e) in ranges.items()], count, path)
    entry = Entry(JOB, ARCHIVED, A0, 0, 0, data=data)
    read_back = Entry.from_json(entry.to_json())
    assert archived_ranges(read_back) == ranges
    assert read_back.data["count"] == count
    assert read_back.data["path"] == path


def test_archived_ranges_of_an_entry_without_ranges_are_empty() -> None:
    assert archived_ranges(Entry(JOB, ARCHIVING, A0, 0, 5)) == {}
    data = scope_data([(A1, 3, 9), (B0, 0, 2)], 8, "s3a://bucket/dlq")
    assert data == {
        "ranges": {"broker-a:1": [3, 9], "broker-b:0": [0, 2]},
        "count": 8,
        "path": "s3a://bucket/dlq",
    }


# ------------------------------------------------------------------ message keys

HEX32 = re.compile(r"[0-9A-F]{32}")


@given(st.text(), queue_keys, offsets)
def test_a_message_key_is_32_upper_case_hex_digits_and_deterministic(
    job: str, queue: QueueKey, offset: int
) -> None:
    key = message_key(job, queue, offset)
    assert HEX32.fullmatch(key), key
    assert message_key(job, QueueKey(queue.broker, queue.queue_id), offset) == key


@given(
    st.tuples(names, queue_keys, offsets),
    st.tuples(names, queue_keys, offsets),
)
def test_distinct_dead_letters_get_distinct_message_keys(
    one: tuple[str, QueueKey, int], other: tuple[str, QueueKey, int]
) -> None:
    if one != other:
        assert message_key(*one) != message_key(*other)


@given(names, queue_keys, st.lists(offsets, max_size=5))
def test_the_keys_of_a_run_of_offsets_are_their_message_keys(
    job: str, queue: QueueKey, run: list[int]
) -> None:
    assert message_keys(job, queue, run) == [message_key(job, queue, o) for o in run]


def test_message_keys_differ_in_each_part() -> None:
    base = message_key(JOB, A0, 7)
    variants = [
        message_key("drain-orders", A0, 7),
        message_key(JOB, A1, 7),
        message_key(JOB, QueueKey("broker-b", 0), 7),
        message_key(JOB, A0, 8),
        message_key(JOB, QueueKey("broker-a:0", 7), 0),
    ]
    assert len({base, *variants}) == 1 + len(variants)
    # Pinned: a re-run by a newer version must give the ids of the attempt it finishes.
    assert base == "15799B928BEEDCBCFA5F582C88BD01C8"
    assert message_key(JOB, QueueKey.parse("broker-a:0"), 7) == base


def test_the_ledger_topic_and_kinds() -> None:
    assert ledger.LEDGER_TOPIC == "RECONSUME_DLQ_LEDGER"
    assert set(KINDS) == {"started", "sending", "sent", "archiving", "archived"}


def test_the_last_write_of_a_job_is_its_newest_stored_entry_and_not_part_of_the_body() -> None:
    body = sending(0, 5).to_json()
    entries = [
        Entry.from_json(body, 1_000),
        Entry.from_json(sent(5).to_json(), 3_000),
        Entry.from_json(Entry("other", ledger.SENT, A0, 9, 9).to_json(), 9_000),
        Entry.from_json(body),
    ]
    assert ledger.last_written_ms(entries, JOB) == 3_000
    assert ledger.last_written_ms(entries, "nobody") is None
    assert entries[0] == Entry.from_json(body)  # the store time does not tell entries apart
    assert b"1000" not in entries[0].to_json()
