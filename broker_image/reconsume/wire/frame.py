"""Remoting frames: ``int32 length | int32 (serializeType << 24 | headerLength) | header | body``.

``length`` counts everything after itself. The header is JSON (RocketMQ's fastjson form of
``RemotingCommand``) or the binary ROCKETMQ form::

    code i16 | language u8 | version i16 | opaque i32 | flag i32
    remark (i32 length + UTF-8) | extFields (i32 length; per entry i16 key length + key,
    i32 value length + value)

A response is encoded in its request's serialization type. Anything malformed raises
:class:`FrameError`; a server closes that one connection.
"""

from __future__ import annotations

import struct

import orjson

from reconsume.errors import FrameError
from reconsume.wire.codes import LanguageCode, SerializeType
from reconsume.wire.command import RemotingCommand

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Largest accepted value of the length field (RocketMQ's default, 16 MiB)."""

_I32 = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")
_I16 = struct.Struct(">h")
_LANG_BY_NAME = {lang.name: int(lang) for lang in LanguageCode}
_LANG_NAMES = {int(lang): lang.name for lang in LanguageCode}


# ---------------------------------------------------------------------------- encoding
def _json_header(cmd: RemotingCommand) -> bytes:
    # Key order as fastjson writes it (sorted); remark omitted when null, as fastjson does.
    header: dict[str, object] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = _LANG_NAMES.get(cmd.language, "OTHER")
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return orjson.dumps(header)


def _binary_header(cmd: RemotingCommand) -> bytes:
    parts = [_BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_I32.pack(len(remark)))
    parts.append(remark)
    fields: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        k = key.encode()
        v = value.encode()
        fields.append(_I16.pack(len(k)) + k + _I32.pack(len(v)) + v)
    ext = b"".join(fields)
    parts.append(_I32.pack(len(ext)))
    parts.append(ext)
    return b"".join(parts)


def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type is SerializeType.ROCKETMQ:
        return _binary_header(cmd)
    return _json_header(cmd)


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included."""
    header = encode_header(cmd)
    body = cmd.body
    return (
        _PREFIX.pack(4 + len(header) + len(body), (cmd.serialize_type << 24) | len(header))
        + header
        + body
    )


# ---------------------------------------------------------------------------- decoding
def _as_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"header field {name} must be an integer, got {value!r}")
    return value


def _decode_json_header(raw: bytes | memoryview) -> dict[str, object]:
    try:
        # orjson takes strict UTF-8 only (no UTF-16/32, no encoded or escaped lone
        # surrogates), integers within 64 bits and nesting up to 1024 levels.
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"JSON header does not parse: {exc}") from exc
    if not isinstance(header, dict):
        raise FrameError("JSON header is not an object")
    return header


def _json_command(raw: bytes | memoryview, body: bytes) -> RemotingCommand:
    header = _decode_json_header(raw)
    get = header.get
    language = get("language", "JAVA")
    if type(language) is str:
        language = _LANG_BY_NAME.get(language, LanguageCode.OTHER)
    ext = get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        raise FrameError("header field extFields must be an object")
    else:
        # The decoded object is ours to keep. JSON object keys are always strings; Java sends
        # every value as one, other clients numbers, booleans and nulls too.
        for value in ext.values():
            if type(value) is not str:
                ext = {k: _ext_value(v) for k, v in ext.items() if v is not None}
                break
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise FrameError("header field remark must be a string")
    code = get("code")
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    if not type(code) is type(opaque) is type(flag) is type(version) is type(language) is int:
        code = _as_int(code, "code")
        opaque = _as_int(opaque, "opaque")
        flag = _as_int(flag, "flag")
        version = _as_int(version, "version")
        language = _as_int(language, "language")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        language=language,
        version=version,
        serialize_type=SerializeType.JSON,
    )


def _ext_value(value: object) -> str:
    # Java writes every value as a string; other clients send numbers and booleans.
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise FrameError(f"extFields value {value!r} is not a string, number or boolean")


def _binary_command(raw: bytes | memoryview, body: bytes) -> RemotingCommand:
    end = len(raw)
    if end < _BIN_FIXED.size + 8:
        raise FrameError(f"binary header of {end} bytes is shorter than its fixed part")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(raw, 0)
    at = _BIN_FIXED.size
    remark_len = _I32.unpack_from(raw, at)[0]
    at += 4
    if remark_len < 0 or at + remark_len + 4 > end:
        raise FrameError(f"binary header: remark length {remark_len} overruns the header")
    try:
        remark = bytes(raw[at : at + remark_len]).decode() if remark_len else None
        at += remark_len
        ext_len = _I32.unpack_from(raw, at)[0]
        at += 4
        if ext_len < 0 or at + ext_len != end:
            raise FrameError(f"binary header: extFields length {ext_len} disagrees with the header")
        ext: dict[str, str] = {}
        while at < end:
            if at + 2 > end:
                raise FrameError("binary header: truncated extFields key length")
            key_len = _I16.unpack_from(raw, at)[0]
            at += 2
            if key_len < 0 or at + key_len + 4 > end:
                raise FrameError(f"binary header: key length {key_len} overruns extFields")
            key = bytes(raw[at : at + key_len]).decode()
            at += key_len
            value_len = _I32.unpack_from(raw, at)[0]
            at += 4
            if value_len < 0 or at + value_len > end:
                raise FrameError(f"binary header: value length {value_len} overruns extFields")
            ext[key] = bytes(raw[at : at + value_len]).decode()
            at += value_len
    except UnicodeDecodeError as exc:
        raise FrameError(f"binary header holds invalid UTF-8: {exc}") from exc
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        language=language & 0xFF,
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_payload(payload: bytes | memoryview) -> RemotingCommand:
    """Decode what follows the length field of one frame."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes has no header length")
    word = _I32.unpack_from(payload, 0)[0]
    kind = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    if 4 + header_len > len(payload):
        raise FrameError(f"header length {header_len} exceeds the frame ({len(payload)} bytes)")
    header = memoryview(payload)[4 : 4 + header_len]
    body = bytes(memoryview(payload)[4 + header_len :])
    if kind == SerializeType.JSON:
        return _json_command(header, body)
    if kind == SerializeType.ROCKETMQ:
        return _binary_command(header, body)
    raise FrameError(f"unknown serialization type {kind}")


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one whole frame, length prefix included, which must fill ``frame`` exactly."""
    if len(frame) < 4:
        raise FrameError("frame shorter than its length field")
    length = _I32.unpack_from(frame, 0)[0]
    if length != len(frame) - 4:
        raise FrameError(f"length field says {length}, frame has {len(frame) - 4} bytes")
    return decode_payload(memoryview(frame)[4:])


class FrameReader:
    """Cuts a byte stream into commands; feed it what the socket delivers."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Every command completed by ``data``; raises FrameError on a bad frame (the stream
        cannot be resynchronised after one, so the caller closes the connection)."""
        buffer = self._buffer
        buffer += data
        commands: list[RemotingCommand] = []
        start = 0
        try:
            while len(buffer) - start >= 4:
                length = _I32.unpack_from(buffer, start)[0]
                if length < 4 or length > self._max:
                    raise FrameError(f"frame length {length} is outside 4..{self._max} bytes")
                end = start + 4 + length
                if end > len(buffer):
                    break
                # Decode a copy: a view of the buffer kept alive by a FrameError's traceback
                # would make the resize below raise BufferError.
                with memoryview(buffer) as view:
                    payload = bytes(view[start + 4 : end])
                commands.append(decode_payload(payload))
                start = end
        finally:
            del buffer[:start]
        return commands

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)
