"""Message and StoredMessage accessors."""

from __future__ import annotations

import zlib

from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.model import Message, StoredMessage

HOST = HostAddress(bytes([10, 0, 0, 1]), 10911)


def stored(**changes: object) -> StoredMessage:
    base: dict[str, object] = {
        "store_size": 100,
        "body_crc": 0,
        "queue_id": 0,
        "flag": 0,
        "queue_offset": 0,
        "commit_log_offset": 0x1234,
        "sys_flag": 0,
        "born_timestamp_ms": 0,
        "born_host": HOST,
        "store_timestamp_ms": 0,
        "store_host": HOST,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
        "body": b"body",
        "topic": "T",
        "properties": {},
    }
    return StoredMessage(**{**base, **changes})  # type: ignore[arg-type]


def test_message_tags() -> None:
    message = Message("T", b"x")
    assert message.tags is None
    message.tags = "TagA"
    assert message.properties == {"TAGS": "TagA"}
    message.tags = None
    assert message.properties == {}


def test_message_keys() -> None:
    message = Message("T", b"x")
    assert message.keys == []
    message.keys = ["k1", "k2"]
    assert message.properties["KEYS"] == "k1 k2"
    assert message.keys == ["k1", "k2"]
    message.properties["KEYS"] = " a  b "
    assert message.keys == ["a", "b"]
    message.keys = []
    assert "KEYS" not in message.properties


def test_message_delay_level() -> None:
    message = Message("T", b"x")
    assert message.delay_level == 0
    message.delay_level = 3
    assert message.properties["DELAY"] == "3"
    assert message.delay_level == 3
    message.delay_level = 0
    assert "DELAY" not in message.properties
    message.properties["DELAY"] = ""
    assert message.delay_level == 0


def test_stored_message_ids_and_properties() -> None:
    message = stored(properties={"UNIQ_KEY": "ABC", "TAGS": "TagA", "KEYS": "k1 k2"})
    assert message.msg_id == "0A00000100002A9F0000000000001234"
    assert message.uniq_key == "ABC"
    assert message.tags == "TagA"
    assert message.keys == ["k1", "k2"]
    bare = stored()
    assert (bare.uniq_key, bare.tags, bare.keys) == (None, None, [])


def test_uncompressed_body() -> None:
    plain = stored(body=b"plain")
    assert not plain.is_compressed
    assert plain.uncompressed_body() == b"plain"
    packed = stored(body=zlib.compress(b"a" * 100), sys_flag=sysflag.COMPRESSED)
    assert packed.is_compressed
    assert packed.uncompressed_body() == b"a" * 100


def test_sysflag_bits() -> None:
    assert sysflag.BORNHOST_V6 == 0x10
    assert sysflag.STOREHOST_V6 == 0x20
    assert sysflag.transaction_type(sysflag.TRANSACTION_COMMIT_TYPE | 0x1) == 0x8
    assert sysflag.transaction_type(0x30) == sysflag.TRANSACTION_NOT_TYPE
