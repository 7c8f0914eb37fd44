"""The V1 record codec on bad input: every failure is a specific CodecError, never garbage."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.errors import (
    BadMagicError,
    BodyCrcError,
    CodecError,
    InvalidArgumentError,
    MessageTooLargeError,
    PropertyError,
    RecordLengthError,
    TruncatedRecordError,
)
from reconsume.message.address import HostAddress
from reconsume.message.codec import (
    BLANK_MAGIC_CODE,
    body_crc,
    encode_record,
)
from reconsume.message.decode import (
    check_record,
    check_routing,
    decode_record,
    iter_records,
    peek_routing,
)
from reconsume.message.model import StoredMessage

V4 = HostAddress(bytes([10, 0, 0, 1]), 10911)
V6 = HostAddress(bytes(range(16)), 10911)
OFF_BODY_LEN_V4 = 84  # the last field of the 88-byte IPv4 head


def fields(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "queue_id": 3,
        "flag": 0,
        "queue_offset": 10,
        "physical_offset": 4096,
        "sys_flag": 0,
        "born_timestamp_ms": 1_700_000_000_000,
        "born_host": V4,
        "store_timestamp_ms": 1_700_000_000_123,
        "store_host": V4,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
        "body": b"hello",
        "topic": "TopicTest",
        "properties": "TAGS\x01TagA\x02KEYS\x01k\x02",
    }
    return {**base, **changes}


RECORD = encode_record(**fields())
RECORD_V6 = encode_record(**fields(born_host=V6, store_host=V6))
BODY_AT = 88
TOPIC_LEN_AT = BODY_AT + 5
PROPS_LEN_AT = TOPIC_LEN_AT + 1 + len("TopicTest")


def patched(raw: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


def test_layout_offsets_used_below() -> None:
    assert struct.unpack_from(">i", RECORD, OFF_BODY_LEN_V4)[0] == 5
    assert RECORD[BODY_AT : BODY_AT + 5] == b"hello"
    assert RECORD[TOPIC_LEN_AT] == 9
    assert struct.unpack_from(">h", RECORD, PROPS_LEN_AT)[0] == len(RECORD) - PROPS_LEN_AT - 2


@pytest.mark.parametrize("raw", [RECORD, RECORD_V6], ids=["v4", "v6"])
def test_truncated_at_every_length(raw: bytes) -> None:
    for cut in range(len(raw)):
        with pytest.raises(TruncatedRecordError):
            decode_record(raw[:cut], verify_crc=True)
        with pytest.raises(TruncatedRecordError):
            check_record(raw, 0, cut)


def test_truncated_at_an_offset() -> None:
    buf = b"\x00" * 7 + RECORD
    assert check_record(buf, 7, len(buf)) == len(RECORD)
    with pytest.raises(TruncatedRecordError):
        check_record(buf, 7, len(buf) - 1)


@pytest.mark.parametrize("magic", [0, -1, BLANK_MAGIC_CODE, -626843480])
def test_wrong_magic(magic: int) -> None:
    with pytest.raises(BadMagicError):
        decode_record(patched(RECORD, 4, ">i", magic))


def test_total_size_high_at_end_of_buffer_is_truncation() -> None:
    with pytest.raises(TruncatedRecordError):
        decode_record(patched(RECORD, 0, ">i", len(RECORD) + 1))
    with pytest.raises(TruncatedRecordError):
        decode_record(patched(RECORD, 0, ">i", 2**31 - 1))


def test_total_size_high_with_bytes_following_is_a_length_error() -> None:
    raw = patched(RECORD, 0, ">i", len(RECORD) + 4) + b"\x00" * 4
    with pytest.raises(RecordLengthError):
        decode_record(raw)


@pytest.mark.parametrize("total", [0, -1, -(2**31), 1, 90, 91, 100])
def test_total_size_low(total: int) -> None:
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, 0, ">i", total))


def test_total_size_one_short() -> None:
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, 0, ">i", len(RECORD) - 1))


@pytest.mark.parametrize("body_len", [6, 4, -1, -(2**31), 2**31 - 1, len(RECORD)])
def test_body_length_lies(body_len: int) -> None:
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, OFF_BODY_LEN_V4, ">i", body_len))


@pytest.mark.parametrize("topic_len", [10, 8, 0, -1, -128, 127])
def test_topic_length_lies(topic_len: int) -> None:
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, TOPIC_LEN_AT, ">b", topic_len))


@pytest.mark.parametrize("delta", [1, -1])
def test_properties_length_lies(delta: int) -> None:
    actual = struct.unpack_from(">h", RECORD, PROPS_LEN_AT)[0]
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, PROPS_LEN_AT, ">h", actual + delta))


@pytest.mark.parametrize("props_len", [-1, -(2**15), 2**15 - 1])
def test_properties_length_out_of_range(props_len: int) -> None:
    with pytest.raises(RecordLengthError):
        decode_record(patched(RECORD, PROPS_LEN_AT, ">h", props_len))


def test_flipped_v6_bit_breaks_the_lengths() -> None:
    with pytest.raises(CodecError):
        decode_record(patched(RECORD, 36, ">i", 0x10))
    with pytest.raises(CodecError):
        decode_record(patched(RECORD_V6, 36, ">i", 0))


def test_crc_mismatch_in_the_crc_field() -> None:
    raw = patched(RECORD, 8, ">i", body_crc(b"hello") ^ 1)
    with pytest.raises(BodyCrcError):
        decode_record(raw, verify_crc=True)
    with pytest.raises(BodyCrcError):
        check_record(raw, 0, len(raw))
    assert decode_record(raw).body == b"hello"  # not verified by default
    assert check_record(raw, 0, len(raw), verify_crc=False) == len(raw)


def test_crc_mismatch_in_the_body() -> None:
    raw = bytearray(RECORD)
    raw[BODY_AT] ^= 0x20
    with pytest.raises(BodyCrcError):
        decode_record(bytes(raw), verify_crc=True)
    with pytest.raises(BodyCrcError):
        list(iter_records(bytes(raw), verify_crc=True))


def test_topic_that_is_not_utf8() -> None:
    raw = bytearray(RECORD)
    raw[TOPIC_LEN_AT + 1] = 0xFF
    with pytest.raises(CodecError):
        decode_record(bytes(raw), verify_crc=True)


def test_properties_that_are_not_utf8() -> None:
    raw = bytearray(RECORD)
    raw[PROPS_LEN_AT + 2] = 0xC3  # a lead byte followed by ASCII
    with pytest.raises(CodecError):
        decode_record(bytes(raw))


@pytest.mark.parametrize("offset", [48 + 4, 64 + 4], ids=["born", "store"])
def test_negative_port_is_a_codec_error(offset: int) -> None:
    with pytest.raises(CodecError):
        decode_record(patched(RECORD, offset, ">i", -1))


def test_iter_records_with_trailing_garbage() -> None:
    with pytest.raises(TruncatedRecordError):
        list(iter_records(RECORD + RECORD[:50]))
    with pytest.raises(BadMagicError):
        list(iter_records(RECORD + b"\x00" * 60))


# ---------------------------------------------------------------- encode limits


def test_topic_of_127_bytes_encodes() -> None:
    raw = encode_record(**fields(topic="t" * 127))
    assert decode_record(raw).topic == "t" * 127


@pytest.mark.parametrize("topic", ["t" * 128, "é" * 64, "x" * 1000])
def test_oversized_topic(topic: str) -> None:
    with pytest.raises(MessageTooLargeError):
        encode_record(**fields(topic=topic))


def test_properties_at_the_limit_encode() -> None:
    props = "K\x01" + "v" * (0x7FFF - 3) + "\x02"
    assert len(props) == 0x7FFF
    message = decode_record(encode_record(**fields(properties=props)), verify_crc=True)
    assert message.properties == {"K": "v" * (0x7FFF - 3)}


@pytest.mark.parametrize("size", [0x8000, 0x10000, 100_000])
def test_oversized_properties(size: int) -> None:
    props = "K\x01" + "v" * (size - 3) + "\x02"
    with pytest.raises(PropertyError):
        encode_record(**fields(properties=props))


def test_multibyte_properties_count_bytes() -> None:
    props = "K\x01" + "é" * 0x4000 + "\x02"  # fewer than 0x7FFF chars, more bytes
    with pytest.raises(PropertyError):
        encode_record(**fields(properties=props))


def test_limits_are_argument_errors_not_codec_errors() -> None:
    assert issubclass(MessageTooLargeError, InvalidArgumentError)
    assert issubclass(PropertyError, InvalidArgumentError)
    assert not issubclass(PropertyError, CodecError)


# ---------------------------------------------------------------- fuzzing

SAMPLES = [
    RECORD,
    RECORD_V6,
    encode_record(**fields(body=b"", properties="")),
    encode_record(**fields(born_host=V6, topic="%DLQ%g", properties="")),
]


def _decode_or_codec_error(raw: bytes) -> None:
    """decode_record either returns a consistent message or raises a CodecError subclass."""
    for verify in (True, False):
        try:
            message = decode_record(raw, verify_crc=verify)
        except CodecError:
            continue
        assert isinstance(message, StoredMessage)
        assert 91 <= message.store_size <= len(raw)
        assert len(message.body) < message.store_size
        if verify:
            assert body_crc(message.body) == message.body_crc


@given(
    st.sampled_from(SAMPLES),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_flipped_bytes_decode_or_raise_codec_error(
    raw: bytes, flips: list[tuple[int, int]]
) -> None:
    buf = bytearray(raw)
    for at, mask in flips:
        buf[at % len(buf)] ^= mask
    _decode_or_codec_error(bytes(buf))
    try:
        size = check_record(buf, 0, len(buf))
    except CodecError:
        return
    assert 0 < size <= len(buf)


@given(
    st.sampled_from(SAMPLES),
    st.integers(0, 10_000),
    st.integers(1, 255),
    st.integers(0, 200),
)
def test_flipped_and_truncated(raw: bytes, at: int, mask: int, cut: int) -> None:
    buf = bytearray(raw)
    buf[at % len(buf)] ^= mask
    _decode_or_codec_error(bytes(buf[: max(0, len(buf) - cut)]))


@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_codec_error(raw: bytes) -> None:
    _decode_or_codec_error(raw)


@given(st.binary(min_size=48, max_size=48), st.binary(max_size=150))
def test_random_bytes_with_valid_magic(head: bytes, tail: bytes) -> None:
    buf = bytearray(head + tail)
    struct.pack_into(">ii", buf, 0, len(buf), -626843481)
    _decode_or_codec_error(bytes(buf))


def _routing_in_two_passes(buf: bytes, verify: bool) -> tuple[Any, ...] | type[CodecError]:
    """What check_record then peek_routing make of ``buf``: the routing, or the error class."""
    try:
        size = check_record(buf, 0, len(buf), verify_crc=verify)
        topic, queue_id, queue_offset, store_ts, properties = peek_routing(buf, 0)
    except CodecError as exc:
        return type(exc)
    except UnicodeDecodeError:
        return CodecError
    physical = struct.unpack_from(">q", buf, 28)[0]
    return size, topic, queue_id, queue_offset, physical, store_ts, properties


@given(
    st.sampled_from(SAMPLES),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    st.integers(0, 200),
    st.booleans(),
)
def test_check_routing_agrees_with_check_record_then_peek_routing(
    raw: bytes, flips: list[tuple[int, int]], cut: int, verify: bool
) -> None:
    """The one-pass check a replica and recovery run on every record raises what the two
    passes raise, and returns what they return."""
    buf = bytearray(raw)
    for at, mask in flips:
        buf[at % len(buf)] ^= mask
    data = bytes(buf[: max(0, len(buf) - cut)])
    expected = _routing_in_two_passes(data, verify)
    try:
        got: tuple[Any, ...] | type[CodecError] = check_routing(
            data, 0, len(data), verify_crc=verify
        )
    except CodecError as exc:
        got = type(exc)
    assert got == expected
