"""A remoting command: one request or response frame, decoded."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from reconsume.wire.codes import VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

_opaques = itertools.count(1)


def next_opaque() -> int:
    """A request id unique within this process (wraps within int32)."""
    return next(_opaques) & 0x7FFFFFFF


@dataclass(slots=True)
class RemotingCommand:
    """RocketMQ's ``RemotingCommand``: code, request id (``opaque``), flags, remark, string
    header fields (``ext_fields``) and an opaque body."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: int = LanguageCode.PYTHON
    version: int = VERSION
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        return cls(
            code=code,
            opaque=next_opaque(),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=ext_fields or {},
            body=body,
            serialize_type=serialize_type,
        )

    def respond(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, same serialization type."""
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields or {},
            body=body,
            serialize_type=self.serialize_type,
        )

    def describe(self) -> str:
        """Short text for logs and errors: kind, code name and request id."""
        kind = "response" if self.is_response else "request"
        try:
            name = (ResponseCode if self.is_response else RequestCode)(self.code).name
        except ValueError:
            name = str(self.code)
        return f"{kind} {name} (opaque {self.opaque})"
