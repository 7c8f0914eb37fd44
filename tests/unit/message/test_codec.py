"""The V1 record codec: golden byte vectors built field by field, and round-trips."""

from __future__ import annotations

import mmap
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.codec import (
    MESSAGE_MAGIC_CODE,
    body_crc,
    encode_record,
    record_size,
    write_record,
)
from reconsume.message.decode import (
    check_record,
    decode_record,
    iter_records,
    peek_routing,
)
from reconsume.message.model import StoredMessage
from reconsume.message.properties import decode_properties, encode_properties

V4_BORN = HostAddress(bytes([127, 0, 0, 1]), 10911)
V4_STORE = HostAddress(bytes([10, 0, 0, 2]), 10911)
V6_BORN = HostAddress(bytes.fromhex("20010db8000000000000000000000001"), 40000)
V6_STORE = HostAddress(bytes.fromhex("fe800000000000000000000000000abc"), 10911)

# A small IPv4 record written out by hand, one line per field of the V1 layout.
LITERAL_HEX = "".join(
    [
        "00000065",  # totalSize = 101
        "DAA320A7",  # magic -626843481
        "58932AAC",  # bodyCRC of b"hi"
        "00000001",  # queueId 1
        "00000000",  # flag 0
        "0000000000000002",  # queueOffset 2
        "0000000000000100",  # physicalOffset 256
        "00000000",  # sysFlag 0
        "0000000102030405",  # bornTimestamp
        "7F00000100002A9F",  # bornHost 127.0.0.1:10911
        "0000000102030406",  # storeTimestamp
        "0A00000200002A9F",  # storeHost 10.0.0.2:10911
        "00000003",  # reconsumeTimes 3
        "0000000000000000",  # preparedTransactionOffset 0
        "000000026869",  # bodyLength 2, b"hi"
        "0154",  # topicLength 1, "T"
        "000754414753014102",  # propertiesLength 7, "TAGS\x01A\x02"
    ]
)
LITERAL_FIELDS: dict[str, Any] = {
    "queue_id": 1,
    "flag": 0,
    "queue_offset": 2,
    "physical_offset": 0x100,
    "sys_flag": 0,
    "born_timestamp_ms": 0x0102030405,
    "born_host": V4_BORN,
    "store_timestamp_ms": 0x0102030406,
    "store_host": V4_STORE,
    "reconsume_times": 3,
    "prepared_transaction_offset": 0,
    "body": b"hi",
    "topic": "T",
    "properties": "TAGS\x01A\x02",
}


def crc32_bitwise(data: bytes) -> int:
    """Reference CRC-32 (IEEE, reflected 0xEDB88320), independent of zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def host_bytes(host: HostAddress) -> bytes:
    return host.ip + struct.pack(">i", host.port)


def golden(f: dict[str, Any]) -> bytes:
    """The record for fields ``f``, assembled field by field from the documented layout."""
    sys_flag = f["sys_flag"] & ~0x30
    sys_flag |= 0x10 if len(f["born_host"].ip) == 16 else 0
    sys_flag |= 0x20 if len(f["store_host"].ip) == 16 else 0
    topic = f["topic"].encode()
    props = f["properties"].encode()
    rest = b"".join(
        [
            struct.pack(">i", -626843481),
            struct.pack(">i", crc32_bitwise(f["body"]) & 0x7FFFFFFF),
            struct.pack(">i", f["queue_id"]),
            struct.pack(">i", f["flag"]),
            struct.pack(">q", f["queue_offset"]),
            struct.pack(">q", f["physical_offset"]),
            struct.pack(">i", sys_flag),
            struct.pack(">q", f["born_timestamp_ms"]),
            host_bytes(f["born_host"]),
            struct.pack(">q", f["store_timestamp_ms"]),
            host_bytes(f["store_host"]),
            struct.pack(">i", f["reconsume_times"]),
            struct.pack(">q", f["prepared_transaction_offset"]),
            struct.pack(">i", len(f["body"])),
            f["body"],
            struct.pack(">b", len(topic)),
            topic,
            struct.pack(">h", len(props)),
            props,
        ]
    )
    return struct.pack(">i", 4 + len(rest)) + rest


def expected_message(f: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        store_size=len(golden(f)),
        body_crc=crc32_bitwise(f["body"]) & 0x7FFFFFFF,
        queue_id=f["queue_id"],
        flag=f["flag"],
        queue_offset=f["queue_offset"],
        commit_log_offset=f["physical_offset"],
        sys_flag=(f["sys_flag"] & ~0x30)
        | (0x10 if f["born_host"].is_v6 else 0)
        | (0x20 if f["store_host"].is_v6 else 0),
        born_timestamp_ms=f["born_timestamp_ms"],
        born_host=f["born_host"],
        store_timestamp_ms=f["store_timestamp_ms"],
        store_host=f["store_host"],
        reconsume_times=f["reconsume_times"],
        prepared_transaction_offset=f["prepared_transaction_offset"],
        body=f["body"],
        topic=f["topic"],
        properties=decode_properties(f["properties"]),
    )


def fields(**changes: Any) -> dict[str, Any]:
    return {**LITERAL_FIELDS, **changes}


GOLDEN_CASES = {
    "ipv4": fields(),
    "born_v6_store_v4": fields(born_host=V6_BORN, sys_flag=sysflag.COMPRESSED),
    "born_v4_store_v6": fields(store_host=V6_STORE),
    "both_v6": fields(born_host=V6_BORN, store_host=V6_STORE, queue_id=7),
    "empty_body": fields(body=b"", properties=""),
    "properties": fields(
        properties=encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}),
        topic="%RETRY%group_1",
    ),
    "negatives_and_extremes": fields(
        queue_id=-1,
        flag=-(2**31),
        queue_offset=2**63 - 1,
        physical_offset=-(2**63),
        sys_flag=sysflag.TRANSACTION_PREPARED_TYPE | sysflag.MULTI_TAGS,
        reconsume_times=2**31 - 1,
        prepared_transaction_offset=-5,
        body=bytes(range(256)),
    ),
}


def test_literal_hex_vector_is_the_layout() -> None:
    assert golden(LITERAL_FIELDS).hex().upper() == LITERAL_HEX
    assert encode_record(**LITERAL_FIELDS).hex().upper() == LITERAL_HEX


def test_literal_hex_vector_decodes() -> None:
    message = decode_record(bytes.fromhex(LITERAL_HEX), verify_crc=True)
    assert message == expected_message(LITERAL_FIELDS)
    assert message.store_size == 101
    assert message.body_crc == 0x58932AAC
    assert message.properties == {"TAGS": "A"}
    assert message.msg_id == "0A00000200002A9F0000000000000100"


def test_magic_constant() -> None:
    assert struct.pack(">i", MESSAGE_MAGIC_CODE) == bytes.fromhex("DAA320A7")


@pytest.mark.parametrize("case", GOLDEN_CASES.values(), ids=GOLDEN_CASES.keys())
def test_encode_matches_golden(case: dict[str, Any]) -> None:
    assert encode_record(**case) == golden(case)


@pytest.mark.parametrize("case", GOLDEN_CASES.values(), ids=GOLDEN_CASES.keys())
def test_decode_golden_gives_every_field(case: dict[str, Any]) -> None:
    raw = golden(case)
    message = decode_record(raw, verify_crc=True)
    assert message == expected_message(case)
    assert check_record(raw, 0, len(raw)) == len(raw)


def test_v6_bits_follow_host_lengths_not_the_caller() -> None:
    # The caller claims both hosts are v6; the lengths say v4, so the bits are cleared.
    raw = encode_record(**fields(sys_flag=sysflag.HOST_V6_MASK | sysflag.COMPRESSED))
    assert struct.unpack_from(">i", raw, 36)[0] == sysflag.COMPRESSED
    raw = encode_record(**fields(born_host=V6_BORN, store_host=V6_STORE))
    assert struct.unpack_from(">i", raw, 36)[0] == sysflag.HOST_V6_MASK


@pytest.mark.parametrize(
    ("born_v6", "store_v6", "head"), [(False, False, 88), (True, False, 100), (True, True, 112)]
)
def test_record_size(born_v6: bool, store_v6: bool, head: int) -> None:
    assert record_size(0, 0, 0, born_v6, store_v6) == head + 3
    assert record_size(10, 5, 7, born_v6, store_v6) == head + 3 + 22


@pytest.mark.parametrize("data", [b"", b"hi", b"123456789", bytes(range(256)), b"\xff" * 1000])
def test_body_crc_is_masked_crc32(data: bytes) -> None:
    assert body_crc(data) == crc32_bitwise(data) & 0x7FFFFFFF
    assert 0 <= body_crc(data) <= 0x7FFFFFFF
    assert body_crc(memoryview(data)) == body_crc(data)


def test_body_crc_known_value() -> None:
    assert crc32_bitwise(b"123456789") == 0xCBF43926  # the CRC-32 check value
    assert body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF == 0x4BF43926


# ---------------------------------------------------------------- hypothesis

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
hosts = st.builds(
    HostAddress,
    ip=st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16),
    port=st.integers(0, 0x7FFFFFFF),
)
topics = st.from_regex(r"[%|a-zA-Z0-9_-]{1,127}", fullmatch=True)
prop_text = st.text(
    st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), max_size=20
)
prop_dicts = st.dictionaries(prop_text.filter(bool), prop_text, max_size=6)
record_fields = st.fixed_dictionaries(
    {
        "queue_id": i32,
        "flag": i32,
        "queue_offset": i64,
        "physical_offset": i64,
        "sys_flag": i32,
        "born_timestamp_ms": i64,
        "born_host": hosts,
        "store_timestamp_ms": i64,
        "store_host": hosts,
        "reconsume_times": i32,
        "prepared_transaction_offset": i64,
        "body": st.binary(max_size=300),
        "topic": topics,
        "properties": prop_dicts.map(encode_properties),
    }
)


@given(record_fields)
def test_encode_decode_round_trip(f: dict[str, Any]) -> None:
    raw = encode_record(**f)
    assert raw == golden(f)
    assert len(raw) == record_size(
        len(f["body"]),
        len(f["topic"].encode()),
        len(f["properties"].encode()),
        f["born_host"].is_v6,
        f["store_host"].is_v6,
    )
    assert decode_record(raw, verify_crc=True) == expected_message(f)


@given(record_fields)
def test_decode_from_any_buffer_type(f: dict[str, Any]) -> None:
    raw = encode_record(**f)
    expected = expected_message(f)
    assert decode_record(bytearray(raw)) == expected
    assert decode_record(memoryview(raw), verify_crc=True) == expected
    with mmap.mmap(-1, len(raw) + 3) as mm:
        mm[3:] = raw
        assert decode_record(mm, 3, verify_crc=True) == expected


@given(record_fields, st.integers(0, 50))
def test_write_record_in_place(f: dict[str, Any], pos: int) -> None:
    raw = encode_record(**f)
    buf = bytearray(b"\xee" * (pos + len(raw) + 5))
    args = {
        **f,
        "born_host": f["born_host"].packed(),
        "store_host": f["store_host"].packed(),
        "topic": f["topic"].encode(),
        "properties": f["properties"].encode(),
    }
    assert write_record(buf, pos, **args) == len(raw)
    assert buf[pos : pos + len(raw)] == raw
    assert buf[:pos] == b"\xee" * pos
    assert buf[pos + len(raw) :] == b"\xee" * 5


@given(st.lists(record_fields, min_size=1, max_size=5))
def test_iter_records_over_concatenation(many: list[dict[str, Any]]) -> None:
    raws = [encode_record(**f) for f in many]
    blob = b"".join(raws)
    assert list(iter_records(blob, verify_crc=True)) == [expected_message(f) for f in many]
    pos = 0
    for raw in raws:
        assert check_record(blob, pos, len(blob)) == len(raw)
        pos += len(raw)


def test_iter_records_of_empty_buffer() -> None:
    assert list(iter_records(b"")) == []


@given(st.lists(record_fields, min_size=1, max_size=4))
def test_peek_routing_agrees_with_decode(many: list[dict[str, Any]]) -> None:
    blob = b"".join(encode_record(**f) for f in many)
    pos = 0
    for f, message in zip(many, iter_records(blob), strict=True):
        assert peek_routing(blob, pos) == (
            message.topic,
            message.queue_id,
            message.queue_offset,
            message.store_timestamp_ms,
            f["properties"],
        )
        pos += message.store_size


def test_peek_routing_reads_ipv6_records() -> None:
    raw = encode_record(**GOLDEN_CASES["both_v6"])
    assert peek_routing(raw, 0) == ("T", 7, 2, 0x0102030406, "TAGS\x01A\x02")


@given(st.binary(max_size=2000))
def test_body_crc_matches_zlib_and_reference(data: bytes) -> None:
    assert body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF == crc32_bitwise(data) & 0x7FFFFFFF
