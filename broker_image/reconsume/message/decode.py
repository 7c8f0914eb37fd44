"""Validating and decoding stored-message records (layout in :mod:`reconsume.message.codec`).

Every malformed input raises a :class:`~reconsume.errors.CodecError` subclass; nothing here
returns a partly decoded record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from reconsume.errors import (
    BadMagicError,
    BodyCrcError,
    CodecError,
    InvalidArgumentError,
    RecordLengthError,
    TruncatedRecordError,
)
from reconsume.message import sysflag
from reconsume.message.address import HostAddress
from reconsume.message.codec import (
    HEAD_LAYOUTS,
    MESSAGE_MAGIC_CODE,
    OFF_BODY_CRC,
    OFF_PHYSICAL_OFFSET,
    OFF_QUEUE_ID,
    OFF_QUEUE_OFFSET,
    OFF_SYS_FLAG,
    PREFIX_SIZE,
    ReadableBuffer,
    body_crc,
    host_length,
    store_timestamp_offset,
)
from reconsume.message.model import StoredMessage
from reconsume.message.properties import decode_properties

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")
_PREFIX = struct.Struct(">ii")
_PROPS_LEN = struct.Struct(">h")
_V6_BITS = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6
_HEADS = {
    bits: HEAD_LAYOUTS[
        (host_length(bits, sysflag.BORNHOST_V6), host_length(bits, sysflag.STOREHOST_V6))
    ]
    for bits in (0, sysflag.BORNHOST_V6, sysflag.STOREHOST_V6, _V6_BITS)
}
"""sysFlag's two v6 bits -> the head layout through bodyLength (one lookup per record)."""
_HOSTS: dict[bytes, HostAddress] = {}
"""Packed host -> HostAddress: the few born and store hosts of a pull recur in every record
(HostAddress is immutable, so records share them)."""
_HOSTS_MAX = 4096


def _host(packed: bytes) -> HostAddress:
    host = _HOSTS.get(packed)
    if host is None:
        host = HostAddress.unpack(packed)
        if len(_HOSTS) >= _HOSTS_MAX:
            _HOSTS.clear()
        _HOSTS[packed] = host
    return host


def head_of(buf: ReadableBuffer, pos: int) -> struct.Struct:
    """The head layout (through bodyLength) of the record at ``pos``, by its sysFlag's two v6
    bits."""
    return _HEADS[_I32.unpack_from(buf, pos + OFF_SYS_FLAG)[0] & _V6_BITS]


def check_record(buf: ReadableBuffer, pos: int, limit: int, *, verify_crc: bool = True) -> int:
    """Validate the record at ``buf[pos:limit]`` without decoding it and return its size.

    Checks the magic, that every inner length fits, that they add up to ``totalSize`` exactly
    and (unless ``verify_crc`` is false) the body CRC. Raises a :class:`CodecError` subclass.
    """
    return _checked(buf, pos, limit, verify_crc)[0]


def check_routing(
    buf: ReadableBuffer, pos: int, limit: int, *, verify_crc: bool = True
) -> tuple[int, str, int, int, int, int, str]:
    """:func:`check_record` and :func:`peek_routing` in one pass over the record at
    ``buf[pos:limit]``: (totalSize, topic, queueId, queueOffset, physicalOffset,
    storeTimestamp, properties). Raises what :func:`check_record` raises, and a
    :class:`CodecError` for a topic or properties that are not UTF-8. What a replica and
    recovery run on every record of the log."""
    total, sys_flag, topic_at, props_len_at = _checked(buf, pos, limit, verify_crc)
    try:
        topic = bytes(buf[topic_at + 1 : props_len_at]).decode()
        properties = bytes(buf[props_len_at + 2 : pos + total]).decode()
    except UnicodeDecodeError as exc:
        raise CodecError(f"record at {pos}: topic or properties are not UTF-8 ({exc})") from exc
    return (
        total,
        topic,
        _I32.unpack_from(buf, pos + OFF_QUEUE_ID)[0],
        _I64.unpack_from(buf, pos + OFF_QUEUE_OFFSET)[0],
        _I64.unpack_from(buf, pos + OFF_PHYSICAL_OFFSET)[0],
        _I64.unpack_from(buf, pos + store_timestamp_offset(sys_flag))[0],
        properties,
    )


def _checked(
    buf: ReadableBuffer, pos: int, limit: int, verify_crc: bool
) -> tuple[int, int, int, int]:
    """The checks of :func:`check_record`; (totalSize, sysFlag, the offset of topicLength, the
    offset of propertiesLength)."""
    avail = limit - pos
    if avail < PREFIX_SIZE:
        raise TruncatedRecordError(f"record at {pos}: {avail} bytes, a header needs {PREFIX_SIZE}")
    total, magic = _PREFIX.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise BadMagicError(f"record at {pos}: magic {magic:#x} is not a message record's")
    sys_flag = _I32.unpack_from(buf, pos + OFF_SYS_FLAG)[0]
    head_size = _HEADS[sys_flag & _V6_BITS].size
    if total > avail:
        raise TruncatedRecordError(
            f"record at {pos}: totalSize {total} but only {avail} bytes follow"
        )
    if total < head_size + 3:
        raise RecordLengthError(f"record at {pos}: totalSize {total} is below the minimum")
    end = pos + total
    body_at = pos + head_size
    body_len = _I32.unpack_from(buf, body_at - 4)[0]
    topic_at = body_at + body_len
    if body_len < 0 or topic_at + 1 > end:
        raise RecordLengthError(f"record at {pos}: body length {body_len} overruns totalSize")
    topic_len = _I8.unpack_from(buf, topic_at)[0]
    props_len_at = topic_at + 1 + topic_len
    if topic_len < 0 or props_len_at + 2 > end:
        raise RecordLengthError(f"record at {pos}: topic length {topic_len} overruns totalSize")
    props_len = _PROPS_LEN.unpack_from(buf, props_len_at)[0]
    if props_len < 0 or props_len_at + 2 + props_len != end:
        raise RecordLengthError(
            f"record at {pos}: lengths add up to {props_len_at + 2 + props_len - pos}, "
            f"totalSize says {total}"
        )
    if verify_crc:
        stored_crc = _I32.unpack_from(buf, pos + OFF_BODY_CRC)[0]
        actual = body_crc(memoryview(buf)[body_at:topic_at])
        if stored_crc != actual:
            raise BodyCrcError(f"record at {pos}: body CRC {stored_crc} but the body's is {actual}")
    return int(total), int(sys_flag), topic_at, props_len_at


def decode_record(buf: ReadableBuffer, pos: int = 0, *, verify_crc: bool = False) -> StoredMessage:
    """Decode the record at ``buf[pos:]`` (validated as by :func:`check_record`)."""
    total = check_record(buf, pos, len(buf), verify_crc=verify_crc)
    head = head_of(buf, pos)
    (
        _total,
        _magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume_times,
        prepared_tx_offset,
        body_len,
    ) = head.unpack_from(buf, pos)
    at = pos + head.size
    body = bytes(buf[at : at + body_len])
    at += body_len
    topic_len = buf[at]
    try:
        topic = bytes(buf[at + 1 : at + 1 + topic_len]).decode()
        at += 1 + topic_len
        props_len = _PROPS_LEN.unpack_from(buf, at)[0]
        properties = decode_properties(bytes(buf[at + 2 : at + 2 + props_len]).decode())
        born = _host(born_host)
        store = _host(store_host)
    except (UnicodeDecodeError, InvalidArgumentError) as exc:
        raise CodecError(f"record at {pos}: {exc}") from exc
    return StoredMessage(
        store_size=total,
        body_crc=crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        commit_log_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp_ms=born_ts,
        born_host=born,
        store_timestamp_ms=store_ts,
        store_host=store,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_tx_offset,
        body=body,
        topic=topic,
        properties=properties,
    )


def iter_records(buf: ReadableBuffer, *, verify_crc: bool = False) -> Iterator[StoredMessage]:
    """Decode consecutive records filling ``buf`` exactly (a pull response body)."""
    pos = 0
    end = len(buf)
    while pos < end:
        message = decode_record(buf, pos, verify_crc=verify_crc)
        yield message
        pos += message.store_size


def peek_routing(buf: ReadableBuffer, pos: int) -> tuple[str, int, int, int, str]:
    """(topic, queueId, queueOffset, storeTimestamp, properties) of a validated record, without
    decoding the rest; what dispatching a record to its consume queue needs."""
    queue_id = _I32.unpack_from(buf, pos + OFF_QUEUE_ID)[0]
    queue_offset = _I64.unpack_from(buf, pos + OFF_QUEUE_OFFSET)[0]
    sys_flag = _I32.unpack_from(buf, pos + OFF_SYS_FLAG)[0]
    head = _HEADS[sys_flag & _V6_BITS]
    store_ts = _I64.unpack_from(buf, pos + store_timestamp_offset(sys_flag))[0]
    at = pos + head.size
    at += _I32.unpack_from(buf, at - 4)[0]
    topic_len = buf[at]
    topic = bytes(buf[at + 1 : at + 1 + topic_len]).decode()
    at += 1 + topic_len
    props_len = _PROPS_LEN.unpack_from(buf, at)[0]
    properties = bytes(buf[at + 2 : at + 2 + props_len]).decode()
    return topic, int(queue_id), int(queue_offset), int(store_ts), properties
