"""Appending a batch body's messages as they came (``append_parts``): the same log bytes and
consume-queue entries as a PutRequest each through ``append_batch``, over segment rolls, v4 and
v6 born hosts and any properties; a message too large refuses the whole batch, nothing
written."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconsume.errors import MessageTooLargeError
from reconsume.message import properties as props
from reconsume.message.batch import BatchPart, merge_properties
from reconsume.store import MessageStore, PutRequest

from ._helpers import check_consistency, request, small_settings

NOW_NS = 1_764_000_000_123_456_789
V4 = b"\x0a\x00\x00\x07\x00\x00\x30\x39"
V6 = bytes(range(16)) + b"\x00\x00\x30\x39"

names = st.text(st.characters(exclude_characters="\x01\x02", codec="utf-8"),
                min_size=1, max_size=8)  # fmt: skip
values = st.text(st.characters(exclude_characters="\x01\x02", codec="utf-8"),
                 max_size=12)  # fmt: skip
encoded_properties = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "a", "b"]) | names, values,
                                     max_size=4).map(props.encode_properties)  # fmt: skip
# a message's own properties may or may not end with the separator, or be empty
own_properties = st.one_of(
    encoded_properties, encoded_properties.map(lambda p: p.rstrip(props.PROPERTY_SEPARATOR))
)
parts = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=300), own_properties),
    min_size=1,
    max_size=12,
)


def log_and_queues(store: MessageStore) -> tuple[bytes, list[list[tuple[int, int, int]]]]:
    log = bytes(store.read_log(store.commitlog.min_offset, 1 << 20))
    queues = [
        [e for e in (q.entry(i) for i in range(q.min_offset, q.max_offset)) if e is not None]
        for q in sorted(store.queues, key=lambda q: (q.topic, q.queue_id))
    ]
    return log, queues


@settings(max_examples=150, deadline=None)
@given(
    before=st.integers(0, 5),
    batch=parts,
    shared=st.sampled_from(["", "CLUSTER\x01DefaultCluster", "CLUSTER\x01c\x02x\x01y"]),
    born_host=st.sampled_from([V4, V6]),
    sys_flag=st.integers(0, 0xFFFF),
    reconsume_times=st.integers(0, 16),
)
def test_append_parts_writes_what_a_request_each_writes(
    before: int,
    batch: list[BatchPart],
    shared: str,
    born_host: bytes,
    sys_flag: int,
    reconsume_times: int,
) -> None:
    requests = [
        PutRequest(
            "Parts",
            3,
            body,
            merge_properties(own, shared),
            flag,
            sys_flag,
            17,
            born_host,
            reconsume_times,
        )
        for flag, body, own in batch
    ]
    outcomes = []
    with (
        tempfile.TemporaryDirectory() as root,
        mock.patch("reconsume.store.appends.time.time_ns", return_value=NOW_NS),
    ):
        for way in ("requests", "parts"):
            with MessageStore(Path(root) / way, small_settings(), background=False) as store:
                for i in range(before):  # earlier records: the batch starts anywhere
                    store.append(request("Parts", 3, b"x" * 150 * i, tags=f"t{i}"))
                if way == "requests":
                    results = store.append_batch(requests)
                    outcome: tuple[object, ...] = (
                        [r.commit_log_offset for r in results], results[-1].end_offset,
                        results[0].queue_offset,
                    )  # fmt: skip
                else:
                    put = store.append_parts("Parts", 3, batch, shared, sys_flag=sys_flag,
                                             born_timestamp_ms=17, born_host=born_host,
                                             reconsume_times=reconsume_times)  # fmt: skip
                    outcome = (put.offsets, put.end_offset, put.queue_offset)
                    last = put.last()
                    assert last.commit_log_offset == put.offsets[-1]
                    assert last.end_offset == put.end_offset
                    assert last.queue_offset == put.queue_offset + len(batch) - 1
                    assert put.tag_codes == [
                        store._tags_code("Parts", r.properties, NOW_NS // 1_000_000)
                        for r in requests
                    ]
                check_consistency(store)
                outcomes.append((outcome, log_and_queues(store)))
    assert outcomes[0] == outcomes[1]


def test_a_message_too_large_refuses_the_whole_batch(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings(), background=False) as store:
        store.append(request("Parts", 0, b"first"))
        end = store.commitlog.write_offset
        batch: list[BatchPart] = [(0, b"fits", ""), (0, b"x" * 1024, "a\x01b"), (0, b"", "")]
        with pytest.raises(MessageTooLargeError, match=r"message to Parts is \d+ bytes stored"):
            store.append_parts("Parts", 0, batch, "", sys_flag=0, born_timestamp_ms=1,
                               born_host=V4, reconsume_times=0)  # fmt: skip
        with pytest.raises(MessageTooLargeError, match="properties"):
            store.append_parts("Parts", 0, [(0, b"", "p\x01" + "v" * 40_000)], "", sys_flag=0,
                               born_timestamp_ms=1, born_host=V4, reconsume_times=0)  # fmt: skip
        assert store.commitlog.write_offset == end
        assert store.max_offset("Parts", 0) == 1
        check_consistency(store)
