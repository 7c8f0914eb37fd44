"""The stored-message record in Apache RocketMQ's V1 layout.

A record is what the commit log stores and, byte for byte, what a pull response carries::

    totalSize i32 | magic i32 | bodyCRC i32 | queueId i32 | flag i32 | queueOffset i64
    physicalOffset i64 | sysFlag i32 | bornTimestamp i64 | bornHost (4|16 bytes + port i32)
    storeTimestamp i64 | storeHost (4|16 bytes + port i32) | reconsumeTimes i32
    preparedTransactionOffset i64 | bodyLength i32 + body | topicLength i8 + topic
    propertiesLength i16 + properties

All integers are big-endian. ``bodyCRC`` is CRC-32 of the body masked to 31 bits, as RocketMQ
computes it. :func:`write_record` writes ``totalSize`` last, so a writer that dies mid-record
leaves a zero size (or one that disagrees with the inner lengths) and never a record that
reads as complete.
"""

from __future__ import annotations

import mmap
import struct
import zlib

from reconsume.errors import (
    MessageTooLargeError,
    PropertyError,
)
from reconsume.message import sysflag
from reconsume.message.address import HostAddress

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap
WritableBuffer = bytearray | memoryview | mmap.mmap

MESSAGE_MAGIC_CODE = -626843481
"""Magic of a V1 message record (0xDAA320A7)."""
BLANK_MAGIC_CODE = -875286124
"""Magic of the filler that closes a commit-log segment (0xCBD43194)."""

MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 0x7FFF

_SIZE = struct.Struct(">i")
_PREFIX = struct.Struct(">iiiiiqqiq")  # up to and including bornTimestamp
PREFIX_SIZE = _PREFIX.size  # 48
_PROPS_LEN = struct.Struct(">h")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")

# Field offsets shared by every record, whatever its host address lengths.
OFF_TOTAL_SIZE = 0
OFF_MAGIC = 4
OFF_BODY_CRC = 8
OFF_QUEUE_ID = 12
OFF_FLAG = 16
OFF_QUEUE_OFFSET = 20
OFF_PHYSICAL_OFFSET = 28
OFF_SYS_FLAG = 36
OFF_BORN_TIMESTAMP = 40
OFF_BORN_HOST = 48


def _head_struct(born_len: int, store_len: int) -> struct.Struct:
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


# (born host bytes, store host bytes) -> head layout through bodyLength.
HEAD_LAYOUTS: dict[tuple[int, int], struct.Struct] = {
    (b, s): _head_struct(b, s) for b in (8, 20) for s in (8, 20)
}

# store host bytes -> born host bytes -> (head layout, the sysFlag v6 bits of those lengths)
RECORD_HEADS: dict[int, dict[int, tuple[struct.Struct, int]]] = {
    s: {
        b: (
            HEAD_LAYOUTS[(b, s)],
            (sysflag.BORNHOST_V6 if b == 20 else 0) | (sysflag.STOREHOST_V6 if s == 20 else 0),
        )
        for b in (8, 20)
    }
    for s in (8, 20)
}

# topic length -> topicLength u8 + topic + propertiesLength i16, to pack the three at once
_TAILS = [struct.Struct(f">B{n}sh") for n in range(256)]


def host_length(sys_flag: int, bit: int) -> int:
    """Bytes of a packed host (address + port) given the record's sysFlag and the v6 bit."""
    return 20 if sys_flag & bit else 8


def store_timestamp_offset(sys_flag: int) -> int:
    """Offset of ``storeTimestamp`` within a record with this sysFlag."""
    return OFF_BORN_HOST + host_length(sys_flag, sysflag.BORNHOST_V6)


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ's body CRC: CRC-32 masked to a non-negative int32."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(
    body_len: int,
    topic_len: int,
    properties_len: int,
    born_v6: bool = False,
    store_v6: bool = False,
) -> int:
    """Total bytes of a record with these part lengths."""
    return (
        HEAD_LAYOUTS[(20 if born_v6 else 8, 20 if store_v6 else 8)].size
        + body_len
        + 1
        + topic_len
        + 2
        + properties_len
    )


def check_part_lengths(topic: bytes, properties: bytes) -> None:
    """Reject a topic or properties string too long for the V1 length fields."""
    if len(topic) > MAX_TOPIC_BYTES:
        raise MessageTooLargeError(
            f"topic is {len(topic)} bytes; the record format allows {MAX_TOPIC_BYTES}"
        )
    if len(properties) > MAX_PROPERTIES_BYTES:
        raise PropertyError(
            f"properties are {len(properties)} bytes; the record format allows "
            f"{MAX_PROPERTIES_BYTES}"
        )


def write_record(
    buf: WritableBuffer,
    pos: int,
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: bytes,
    store_timestamp_ms: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    properties: bytes,
    crc: int | None = None,
) -> int:
    """Write one record at ``buf[pos:]`` and return its size.

    ``born_host`` and ``store_host`` are packed (:meth:`HostAddress.packed`); the v6 bits of
    ``sys_flag`` are set from their lengths. The caller has checked the part lengths
    (:func:`check_part_lengths`) and that the buffer has room. ``totalSize`` is written last.
    """
    head, v6_bits = RECORD_HEADS[len(store_host)][len(born_host)]
    size = head.size + len(body) + 3 + len(topic) + len(properties)
    pack_record(
        buf,
        pos,
        size,
        head,
        body_crc(body) if crc is None else crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        (sys_flag & ~sysflag.HOST_V6_MASK) | v6_bits,
        born_timestamp_ms,
        born_host,
        store_timestamp_ms,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    )
    return size


def pack_record(
    buf: WritableBuffer,
    pos: int,
    size: int,
    head: struct.Struct,
    crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: bytes,
    store_timestamp_ms: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    properties: bytes,
) -> None:
    """:func:`write_record` for a caller that prepared the record: positional, no checks.

    The store's append path (a keyword call with write_record's 16 arguments costs as much as
    packing the record). ``head`` and the v6 bits already in ``sys_flag`` come from
    ``RECORD_HEADS[len(store_host)][len(born_host)]``, ``crc`` is :func:`body_crc` of
    ``body`` and ``size`` is :func:`record_size` of the parts. ``totalSize`` is written last.
    """
    head.pack_into(
        buf,
        pos,
        0,
        MESSAGE_MAGIC_CODE,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp_ms,
        born_host,
        store_timestamp_ms,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    at = pos + head.size
    end = at + len(body)
    buf[at:end] = body
    tail = _TAILS[len(topic)]
    tail.pack_into(buf, end, len(topic), topic, len(properties))
    buf[end + tail.size : pos + size] = properties
    _SIZE.pack_into(buf, pos, size)


def encode_record(
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: HostAddress,
    store_timestamp_ms: int,
    store_host: HostAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: str,
    properties: str,
) -> bytes:
    """Encode one record into new bytes (the store writes in place with :func:`write_record`)."""
    topic_b = topic.encode()
    props_b = properties.encode()
    check_part_lengths(topic_b, props_b)
    size = record_size(len(body), len(topic_b), len(props_b), born_host.is_v6, store_host.is_v6)
    buf = bytearray(size)
    write_record(
        buf,
        0,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp_ms=born_timestamp_ms,
        born_host=born_host.packed(),
        store_timestamp_ms=store_timestamp_ms,
        store_host=store_host.packed(),
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        body=body,
        topic=topic_b,
        properties=props_b,
    )
    return bytes(buf)
