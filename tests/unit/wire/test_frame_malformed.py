"""Malformed frames raise FrameError, and nothing else (no struct.error, KeyError,
UnicodeDecodeError, RecursionError or BufferError)."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reconsume.errors import FrameError
from reconsume.wire.codes import SerializeType
from reconsume.wire.command import RemotingCommand
from reconsume.wire.frame import (
    MAX_FRAME_BYTES,
    FrameReader,
    decode_frame,
    decode_payload,
    encode_frame,
)
from tests.unit.wire.strategies import commands
from tests.unit.wire.test_frame_golden import frame_of, rocketmq_header

VALID_JSON = encode_frame(RemotingCommand(code=10, opaque=1, ext_fields={"a": "b"}, body=b"xy"))
VALID_BINARY = encode_frame(
    RemotingCommand(
        code=10,
        opaque=1,
        remark="r",
        ext_fields={"a": "b"},
        body=b"xy",
        serialize_type=SerializeType.ROCKETMQ,
    )
)


def json_frame(header: object) -> bytes:
    return frame_of(SerializeType.JSON, json.dumps(header).encode())


def assert_frame_error(frame: bytes) -> None:
    """decode_frame and FrameReader both reject ``frame`` with FrameError."""
    with pytest.raises(FrameError):
        decode_frame(frame)
    with pytest.raises(FrameError):
        FrameReader().feed(frame)


# ---------------------------------------------------------------------------- lengths
@pytest.mark.parametrize("frame", [VALID_JSON, VALID_BINARY], ids=["json", "rocketmq"])
def test_truncated_frames(frame: bytes) -> None:
    for cut in range(len(frame)):
        with pytest.raises(FrameError):
            decode_frame(frame[:cut])
        # a stream reader waits for the rest instead
        reader = FrameReader()
        assert reader.feed(frame[:cut]) == []
        assert reader.pending_bytes == cut


def test_frame_longer_than_its_length_field() -> None:
    with pytest.raises(FrameError, match="length field"):
        decode_frame(VALID_JSON + b"\x00")


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3, MAX_FRAME_BYTES + 1, 2**31 - 1])
def test_length_outside_bounds(length: int) -> None:
    reader = FrameReader()
    with pytest.raises(FrameError, match="outside"):
        reader.feed(struct.pack(">i", length) + b"\x00" * 8)


def test_reader_rejects_length_before_the_body_arrives() -> None:
    with pytest.raises(FrameError):
        FrameReader().feed(struct.pack(">i", MAX_FRAME_BYTES + 1))


def test_max_frame_length_is_accepted_and_awaited() -> None:
    reader = FrameReader()
    assert reader.feed(struct.pack(">ii", MAX_FRAME_BYTES, 10)) == []
    assert reader.pending_bytes == 8


def test_reader_custom_maximum() -> None:
    reader = FrameReader(max_frame_bytes=len(VALID_JSON) - 5)
    with pytest.raises(FrameError):
        reader.feed(VALID_JSON)
    assert FrameReader(max_frame_bytes=len(VALID_JSON) - 4).feed(VALID_JSON)


@pytest.mark.parametrize("header_length", [3, 100, 0xFFFFFF])
def test_header_length_beyond_frame(header_length: int) -> None:
    payload = struct.pack(">i", header_length) + b"{}"
    assert_frame_error(struct.pack(">i", len(payload)) + payload)


def test_payload_without_header_length() -> None:
    with pytest.raises(FrameError):
        decode_payload(b"\x00\x00")


@pytest.mark.parametrize("kind", [2, 3, 0x7F, 0x80, 0xFF])
def test_unknown_serialize_type(kind: int) -> None:
    header = b"{}"
    with pytest.raises(FrameError, match="serialization type"):
        decode_frame(frame_of(kind, header))


# ---------------------------------------------------------------------------- JSON
@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"{",
        b"{code:1}",
        b"{'code':1}",
        b'{"code":1,}',
        b'{"code":1}}',
        b"\x00",
        b"nul",
        b'{"code":1,"remark":"\xff"}',  # invalid UTF-8
        b'{"code":1,"remark":"\xed\xa0\x80"}',  # an encoded surrogate
        b"\xef\xbb\xbf\xff",
        '{"code":1}'.encode("utf-16"),  # RocketMQ's JSON header is UTF-8 only
        '{"code":1}'.encode("utf-32-be"),
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the recursion limit
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b'{"code":' + b"1" * 5000 + b"}",  # beyond Python's integer digit limit
    ],
    ids=lambda h: repr(h[:24]),
)
def test_invalid_json(header: bytes) -> None:
    assert_frame_error(frame_of(SerializeType.JSON, header))


@pytest.mark.parametrize("header", [[], [1, 2], "code", 10, 1.5, None, True])
def test_json_that_is_not_an_object(header: object) -> None:
    with pytest.raises(FrameError, match="not an object"):
        decode_frame(json_frame(header))


@pytest.mark.parametrize(
    "header",
    [
        {},  # no code
        {"code": None},
        {"code": "10"},
        {"code": 1.0},
        {"code": True},
        {"code": [10]},
        {"code": 1, "opaque": "1"},
        {"code": 1, "opaque": None},
        {"code": 1, "flag": False},
        {"code": 1, "flag": {"x": 1}},
        {"code": 1, "version": "409"},
        {"code": 1, "language": ["JAVA"]},
        {"code": 1, "language": 3.5},
        {"code": 1, "language": None},
        {"code": 1, "remark": 5},
        {"code": 1, "remark": ["x"]},
        {"code": 1, "extFields": []},
        {"code": 1, "extFields": [["a", "b"]]},
        {"code": 1, "extFields": ""},
        {"code": 1, "extFields": 0},
        {"code": 1, "extFields": False},
        {"code": 1, "extFields": "a=b"},
        {"code": 1, "extFields": {"a": ["b"]}},
        {"code": 1, "extFields": {"a": {"b": "c"}}},
    ],
    ids=str,
)
def test_json_fields_of_the_wrong_type(header: dict[str, object]) -> None:
    assert_frame_error(json_frame(header))


# ---------------------------------------------------------------------------- ROCKETMQ
FIXED = struct.pack(">hbhii", 10, 0, 409, 1, 0)


def binary_frame(header: bytes) -> bytes:
    return frame_of(SerializeType.ROCKETMQ, header)


def entry(key: bytes, value: bytes) -> bytes:
    return struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value


def ext_part(entries: bytes) -> bytes:
    return struct.pack(">i", len(entries)) + entries


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"", id="empty"),
        pytest.param(FIXED[:-1], id="fixed-part-short"),
        pytest.param(FIXED, id="no-remark-length"),
        pytest.param(FIXED + b"\x00\x00\x00\x00", id="no-ext-length"),
        pytest.param(FIXED + b"\x00\x00\x00\x00\x00\x00", id="half-ext-length"),
        # remark length lies
        pytest.param(FIXED + struct.pack(">i", -1) + ext_part(b""), id="remark-negative"),
        pytest.param(FIXED + struct.pack(">i", 5) + b"abc" + ext_part(b""), id="remark-over"),
        pytest.param(FIXED + struct.pack(">i", 2**31 - 1) + ext_part(b""), id="remark-huge"),
        pytest.param(FIXED + struct.pack(">i", 4) + b"abcd", id="remark-eats-ext-length"),
        # extFields length lies
        pytest.param(FIXED + struct.pack(">ii", 0, -1), id="ext-negative"),
        pytest.param(FIXED + struct.pack(">ii", 0, 1), id="ext-over"),
        pytest.param(FIXED + struct.pack(">ii", 0, 0) + entry(b"a", b"b"), id="ext-short-trailing"),
        pytest.param(
            FIXED + struct.pack(">ii", 0, 100) + entry(b"a", b"b"), id="ext-longer-than-header"
        ),
        # key and value lengths lie
        pytest.param(FIXED + struct.pack(">i", 0) + ext_part(b"\x00"), id="key-length-cut"),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h", -1) + b"ab"),
            id="key-negative",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h", 9) + b"ab"),
            id="key-over",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h", 1) + b"a" + b"\x00\x00"),
            id="value-length-cut",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h", 1) + b"a"),
            id="value-length-missing",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h1si", 1, b"a", -1) + b"v"),
            id="value-negative",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(struct.pack(">h1si", 1, b"a", 5) + b"v"),
            id="value-over",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(entry(b"a", b"b") + b"\x00\x01"),
            id="second-entry-cut",
        ),
        # invalid UTF-8
        pytest.param(FIXED + struct.pack(">i", 2) + b"\xc3\x28" + ext_part(b""), id="remark-utf8"),
        pytest.param(FIXED + struct.pack(">i", 0) + ext_part(entry(b"\xff", b"v")), id="key-utf8"),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(entry(b"k", b"\xed\xa0\x80")),
            id="value-surrogate",
        ),
        pytest.param(
            FIXED + struct.pack(">i", 0) + ext_part(entry(b"k", b"ok\xe2\x82")), id="value-cut"
        ),
    ],
)
def test_binary_header_lies(header: bytes) -> None:
    assert_frame_error(binary_frame(header))


def test_binary_header_helper_builds_valid_headers() -> None:
    # the lies above differ from a valid header only where they say
    valid = FIXED + struct.pack(">i", 0) + ext_part(entry(b"a", b"b"))
    assert valid == rocketmq_header(10, 0, 409, 1, 0, b"", [(b"a", b"b")])
    assert decode_frame(binary_frame(valid)).ext_fields == {"a": "b"}


# ---------------------------------------------------------------------------- streams
@pytest.mark.parametrize(
    "bad",
    [json_frame([]), binary_frame(FIXED), frame_of(9, b"{}")],
    ids=["json-not-object", "binary-short", "unknown-type"],
)
def test_bad_frame_after_good_ones_in_one_chunk(bad: bytes) -> None:
    # The good frames' views of the reader's buffer must not outlive a FrameError (a
    # BufferError on the buffer's resize used to escape instead).
    reader = FrameReader()
    with pytest.raises(FrameError):
        reader.feed(VALID_JSON + VALID_BINARY + bad)


def test_bad_frame_after_good_ones_in_separate_chunks() -> None:
    reader = FrameReader()
    assert len(reader.feed(VALID_JSON)) == 1
    with pytest.raises(FrameError):
        reader.feed(json_frame({"code": "x"}))


# ---------------------------------------------------------------------------- fuzz
def decode_or_frame_error(data: bytes) -> None:
    with contextlib.suppress(FrameError):
        assert isinstance(decode_frame(data), RemotingCommand)
    with contextlib.suppress(FrameError):
        for command in FrameReader().feed(data):
            assert isinstance(command, RemotingCommand)


@given(st.binary(max_size=200))
@example(b"\x00\x00\x00\x08\x01\x00\x00\x04\xff\xff\xff\xff")
@example(b"\x00\x00\x00\x06\x00\x00\x00\x02[]")
def test_random_bytes(data: bytes) -> None:
    decode_or_frame_error(data)


@given(st.binary(max_size=200), st.sampled_from(SerializeType))
def test_random_payload_of_a_valid_length(payload: bytes, kind: SerializeType) -> None:
    header_length = len(payload) // 2
    decode_or_frame_error(
        struct.pack(">ii", 4 + len(payload), (kind << 24) | header_length) + payload
    )


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    frame = bytearray(encode_frame(draw(commands())))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        at = draw(st.integers(0, max(len(frame) - 1, 0)))
        if op == "flip" and frame:
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and frame:
            frame[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif frame:
            del frame[at : at + draw(st.integers(1, 4))]
    return bytes(frame)


@given(mutated_frames())
def test_mutated_valid_frames(frame: bytes) -> None:
    decode_or_frame_error(frame)


@given(mutated_frames())
def test_mutated_frame_keeps_length_consistent(frame: bytes) -> None:
    # Re-stamp the length so that the mutation reaches the header decoders.
    if len(frame) >= 4:
        decode_or_frame_error(struct.pack(">i", len(frame) - 4) + frame[4:])


@given(st.lists(commands(), max_size=3), mutated_frames())
def test_stream_with_a_mutated_frame_after_valid_ones(
    cmds: list[RemotingCommand], frame: bytes
) -> None:
    decode_or_frame_error(b"".join(encode_frame(c) for c in cmds) + frame)
