"""Golden bytes of remoting frames in both serializations, built field by field as RocketMQ
4.9.8 writes them (``RemotingCommand.encode`` with fastjson, ``RocketMQSerializable.
rocketMQProtocolEncode``), and decoded back field by field."""

from __future__ import annotations

import struct

import pytest

from reconsume.wire.codes import VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from reconsume.wire.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from reconsume.wire.frame import FrameReader, decode_frame, encode_frame, encode_header


def frame_of(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """``int32 length | int32 (type << 24 | header length) | header | body``."""
    return (
        struct.pack(">i", 4 + len(header) + len(body))
        + struct.pack(">I", (serialize_type << 24) | len(header))  # same bits as Java's int
        + header
        + body
    )


def rocketmq_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: bytes,
    ext: list[tuple[bytes, bytes]],
) -> bytes:
    """The binary header exactly as ``rocketMQProtocolEncode`` lays it out."""
    out = struct.pack(">h", code)  # int code(~32767)
    out += struct.pack(">b", language)  # LanguageCode language
    out += struct.pack(">h", version)  # int version(~32767)
    out += struct.pack(">i", opaque)  # int opaque
    out += struct.pack(">i", flag)  # int flag
    out += struct.pack(">i", len(remark)) + remark  # String remark
    entries = b"".join(
        struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value
        for key, value in ext
    )
    out += struct.pack(">i", len(entries)) + entries  # HashMap<String, String> extFields
    return out


# ---------------------------------------------------------------------------- JSON
ROUTE_REQUEST_HEX = (
    "00000087000000837b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a2254"
    "6f70696354657374227d2c22666c6167223a302c226c616e6775616765223a224a415641222c226f706171"
    "7565223a372c2273657269616c697a655479706543757272656e74525043223a224a534f4e222c22766572"
    "73696f6e223a3430397d"
)
"""GET_ROUTEINFO_BY_TOPIC(topic=TopicTest) from a Java 4.9.8 client, opaque 7."""


def test_json_request_literal_hex() -> None:
    frame = bytes.fromhex(ROUTE_REQUEST_HEX)
    header = (
        b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
        b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    assert frame == frame_of(SerializeType.JSON, header)
    assert frame[:4] == b"\x00\x00\x00\x87"  # 135 bytes follow
    assert frame[4:8] == b"\x00\x00\x00\x83"  # JSON, 131-byte header

    cmd = RemotingCommand(
        code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
        opaque=7,
        ext_fields={"topic": "TopicTest"},
        language=LanguageCode.JAVA,
        version=409,
    )
    assert encode_frame(cmd) == frame

    decoded = decode_frame(frame)
    assert decoded.code == 105
    assert decoded.opaque == 7
    assert decoded.flag == 0
    assert decoded.remark is None
    assert decoded.ext_fields == {"topic": "TopicTest"}
    assert decoded.body == b""
    assert decoded.language == LanguageCode.JAVA
    assert decoded.version == 409
    assert decoded.serialize_type is SerializeType.JSON
    assert not decoded.is_response
    assert not decoded.is_oneway


def test_json_response_with_remark_and_body() -> None:
    # fastjson writes the getters in name order, leaves non-ASCII unescaped and writes the
    # language by enum name; the body follows the header unencoded.
    header = (
        '{"code":17,"extFields":{"k":"v","数":"値"},"flag":1,"language":"PYTHON",'
        '"opaque":2147483647,"remark":"no route for 主题","serializeTypeCurrentRPC":"JSON",'
        f'"version":{VERSION}}}'
    ).encode()
    body = b"\x00\x01body\xff"
    expected = frame_of(SerializeType.JSON, header, body)

    cmd = RemotingCommand(
        code=ResponseCode.TOPIC_NOT_EXIST,
        opaque=0x7FFFFFFF,
        flag=FLAG_RESPONSE,
        remark="no route for 主题",
        ext_fields={"k": "v", "数": "値"},
        body=body,
    )
    assert encode_header(cmd) == header
    assert encode_frame(cmd) == expected

    decoded = decode_frame(expected)
    assert decoded.code == ResponseCode.TOPIC_NOT_EXIST
    assert decoded.opaque == 0x7FFFFFFF
    assert decoded.flag == FLAG_RESPONSE
    assert decoded.is_response
    assert decoded.remark == "no route for 主题"
    assert decoded.ext_fields == {"k": "v", "数": "値"}
    assert decoded.body == body
    assert decoded.language == LanguageCode.PYTHON
    assert decoded.version == VERSION
    assert decoded.serialize_type is SerializeType.JSON


def test_json_omits_null_remark_and_empty_ext_fields() -> None:
    cmd = RemotingCommand(code=0, opaque=1, flag=FLAG_RESPONSE, language=LanguageCode.GO)
    header = (
        b'{"code":0,"flag":1,"language":"GO","opaque":1,'
        b'"serializeTypeCurrentRPC":"JSON","version":' + str(VERSION).encode() + b"}"
    )
    assert encode_frame(cmd) == frame_of(SerializeType.JSON, header)


def test_json_empty_remark_is_kept() -> None:
    cmd = RemotingCommand(code=0, opaque=1, remark="")
    assert b'"remark":""' in encode_header(cmd)
    assert decode_frame(encode_frame(cmd)).remark == ""


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # Go and C++ clients write numbers and booleans in extFields and drop fields.
        (
            b'{"code":34,"extFields":{"n":5,"t":true,"f":false,"s":"x"},"opaque":3}',
            RemotingCommand(
                code=34,
                opaque=3,
                ext_fields={"n": "5", "t": "true", "f": "false", "s": "x"},
                language=LanguageCode.JAVA,
                version=0,
            ),
        ),
        # Unknown language names read as OTHER; a null extFields and null values are absent.
        (
            b'{"code":1,"language":"COBOL","extFields":null,"remark":null,"version":5}',
            RemotingCommand(code=1, language=LanguageCode.OTHER, version=5),
        ),
        (
            b'{"code":1,"language":3,"extFields":{"a":null,"b":"c"}}',
            RemotingCommand(code=1, ext_fields={"b": "c"}, language=3, version=0),
        ),
    ],
)
def test_json_header_from_other_clients(header: bytes, expected: RemotingCommand) -> None:
    assert decode_frame(frame_of(SerializeType.JSON, header)) == expected


# ---------------------------------------------------------------------------- ROCKETMQ
SEND_V2_HEX = (
    "00000030010000270136000199010203040000000200000001720000001100016100000002673100016200"
    "0000015468656c6c6f"
)
"""A oneway SEND_MESSAGE_V2 in the binary header: remark "r", extFields a=g1, b=T, body hello."""


def test_rocketmq_request_literal_hex() -> None:
    frame = bytes.fromhex(SEND_V2_HEX)
    header = rocketmq_header(
        code=310,
        language=LanguageCode.JAVA,
        version=409,
        opaque=0x01020304,
        flag=FLAG_ONEWAY,
        remark=b"r",
        ext=[(b"a", b"g1"), (b"b", b"T")],
    )
    assert frame == frame_of(SerializeType.ROCKETMQ, header, b"hello")
    assert frame[4] == 0x01  # serialization type in the top byte of the header length
    assert frame[5:8] == b"\x00\x00\x27"  # 39-byte header
    assert frame[8:10] == b"\x01\x36"  # code 310
    assert frame[10] == 0x00  # JAVA

    cmd = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        opaque=0x01020304,
        flag=FLAG_ONEWAY,
        remark="r",
        ext_fields={"a": "g1", "b": "T"},
        body=b"hello",
        language=LanguageCode.JAVA,
        version=409,
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert encode_frame(cmd) == frame

    decoded = decode_frame(frame)
    assert decoded.code == RequestCode.SEND_MESSAGE_V2
    assert decoded.language == LanguageCode.JAVA
    assert decoded.version == 409
    assert decoded.opaque == 0x01020304
    assert decoded.flag == FLAG_ONEWAY
    assert decoded.is_oneway
    assert decoded.remark == "r"
    assert decoded.ext_fields == {"a": "g1", "b": "T"}
    assert decoded.body == b"hello"
    assert decoded.serialize_type is SerializeType.ROCKETMQ


def test_rocketmq_response_utf8_lengths_count_bytes() -> None:
    remark = "失败: ü"
    ext = {"ключ": "значение", "k": ""}
    header = rocketmq_header(
        code=ResponseCode.SYSTEM_ERROR,
        language=LanguageCode.PYTHON,
        version=VERSION,
        opaque=-5,
        flag=FLAG_RESPONSE,
        remark=remark.encode(),
        ext=[(k.encode(), v.encode()) for k, v in ext.items()],
    )
    body = bytes(range(256))
    cmd = RemotingCommand(
        code=ResponseCode.SYSTEM_ERROR,
        opaque=-5,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )
    expected = frame_of(SerializeType.ROCKETMQ, header, body)
    assert encode_frame(cmd) == expected
    # remark length counts UTF-8 bytes, not characters
    assert header[13:17] == struct.pack(">i", len(remark.encode()))
    assert len(remark.encode()) != len(remark)

    decoded = decode_frame(expected)
    assert decoded.code == ResponseCode.SYSTEM_ERROR
    assert decoded.language == LanguageCode.PYTHON
    assert decoded.version == VERSION
    assert decoded.opaque == -5
    assert decoded.flag == FLAG_RESPONSE
    assert decoded.remark == remark
    assert decoded.ext_fields == ext
    assert decoded.body == body
    assert decoded.serialize_type is SerializeType.ROCKETMQ


@pytest.mark.parametrize("remark", [None, ""])
def test_rocketmq_missing_remark_and_ext_fields_are_zero_lengths(remark: str | None) -> None:
    # Java writes an int 0 for a null or empty remark and for a null or empty map, and reads
    # a zero-length remark back as null.
    cmd = RemotingCommand(code=0, opaque=9, remark=remark, serialize_type=SerializeType.ROCKETMQ)
    header = rocketmq_header(0, LanguageCode.PYTHON, VERSION, 9, 0, b"", [])
    assert len(header) == 21
    assert encode_frame(cmd) == frame_of(SerializeType.ROCKETMQ, header)
    assert decode_frame(frame_of(SerializeType.ROCKETMQ, header)).remark is None


def test_rocketmq_negative_language_byte_reads_unsigned() -> None:
    header = rocketmq_header(1, -1, 0, 0, 0, b"", [])
    assert decode_frame(frame_of(SerializeType.ROCKETMQ, header)).language == 0xFF


def test_frame_reader_yields_both_kinds_in_order() -> None:
    stream = bytes.fromhex(ROUTE_REQUEST_HEX) + bytes.fromhex(SEND_V2_HEX)
    reader = FrameReader()
    commands = reader.feed(stream)
    assert [c.code for c in commands] == [105, 310]
    assert [c.serialize_type for c in commands] == [SerializeType.JSON, SerializeType.ROCKETMQ]
    assert reader.pending_bytes == 0
