"""LocalOffsetStore: the broadcasting consumer's offsets.json (round trip, atomic replace,
increase-only updates, unreadable files)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from reconsume.client.offsets import NO_OFFSET, LocalOffsetStore
from reconsume.client.routes import MessageQueue
from reconsume.errors import CodecError

A0 = MessageQueue("T", "broker-a", 0)
A1 = MessageQueue("T", "broker-a", 1)
B0 = MessageQueue("T", "broker-b", 0)
RETRY = MessageQueue("%RETRY%g", "broker-a", 0)


def loaded(directory: Path) -> LocalOffsetStore:
    store = LocalOffsetStore(directory)
    asyncio.run(store.load())
    return store


def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    directory = tmp_path / "consumer" / "g"  # created by persist
    store = LocalOffsetStore(directory)
    assert store.path == directory / "offsets.json"
    asyncio.run(store.load())  # no file yet: nothing stored
    assert asyncio.run(store.read(A0)) == NO_OFFSET
    store.update(B0, 7)
    store.update(A1, 0)
    store.update(A0, 12)
    store.update(RETRY, 3)
    asyncio.run(store.persist([A0]))  # every known queue is written, not only those named

    again = loaded(directory)
    for queue, offset in [(A0, 12), (A1, 0), (B0, 7), (RETRY, 3)]:
        assert asyncio.run(again.read(queue)) == offset
        assert again.current(queue) == offset
    assert again.current(MessageQueue("T", "broker-c", 0)) is None

    document = json.loads(store.path.read_text())
    assert document == {
        "offsets": [
            {"topic": "%RETRY%g", "brokerName": "broker-a", "queueId": 0, "offset": 3},
            {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 12},
            {"topic": "T", "brokerName": "broker-a", "queueId": 1, "offset": 0},
            {"topic": "T", "brokerName": "broker-b", "queueId": 0, "offset": 7},
        ]
    }


def test_persist_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.update(A0, 1)
    asyncio.run(store.persist([]))
    store.update(A0, 2)
    asyncio.run(store.persist([]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsets.json"]
    assert asyncio.run(loaded(tmp_path).read(A0)) == 2


def test_a_leftover_temporary_from_a_crash_does_not_break_load(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.update(A0, 5)
    asyncio.run(store.persist([]))
    # a crash between writing the temporary and replacing: a half-written .tmp next to it
    (tmp_path / "offsets.tmp").write_text('{"offsets": [{"topic": "T", "bro')
    again = loaded(tmp_path)
    assert asyncio.run(again.read(A0)) == 5
    again.update(A0, 6)
    asyncio.run(again.persist([]))  # and the next persist writes over it
    assert asyncio.run(loaded(tmp_path).read(A0)) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsets.json"]


def test_updates_only_increase_unless_told_otherwise(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.update(A0, 10)
    store.update(A0, 4)
    assert store.current(A0) == 10
    store.update(A0, 10)
    assert store.current(A0) == 10
    store.update(A0, 11)
    assert store.current(A0) == 11
    store.update(A0, 3, increase_only=False)  # an offset reset moves back
    assert store.current(A0) == 3
    store.update(A1, 0)  # the first offset of a queue is taken whatever it is
    assert store.current(A1) == 0


def test_remove_keeps_a_broadcast_queues_progress(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.update(A0, 9)
    store.remove(A0)
    assert store.current(A0) == 9


def test_load_replaces_what_was_in_memory(tmp_path: Path) -> None:
    writer = LocalOffsetStore(tmp_path)
    writer.update(A0, 1)
    asyncio.run(writer.persist([]))
    store = LocalOffsetStore(tmp_path)
    store.update(B0, 8)
    asyncio.run(store.load())
    assert store.current(B0) is None
    assert store.current(A0) == 1


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[]",
        b'"offsets"',
        b"{}",
        b'{"offsets": null}',
        b'{"offsets": [{"topic": "T", "brokerName": "a", "queueId": 0}]}',
        b'{"offsets": [{"topic": "T", "brokerName": "a", "queueId": 0, "offset": "x"}]}',
        b'{"offsets": [{"topic": "T", "queueId": 0, "offset": 1}]}',
        b'{"offsets": ["T"]}',
    ],
    ids=[
        "not-json",
        "not-utf8",
        "list",
        "string",
        "no-offsets",
        "null-offsets",
        "no-offset",
        "offset-not-int",
        "no-broker",
        "entry-not-object",
    ],
)
def test_an_unreadable_file_raises_codec_error_naming_it(tmp_path: Path, content: bytes) -> None:
    store = LocalOffsetStore(tmp_path)
    store.path.write_bytes(content)
    with pytest.raises(CodecError, match="unreadable") as caught:
        asyncio.run(store.load())
    assert str(store.path) in str(caught.value)
