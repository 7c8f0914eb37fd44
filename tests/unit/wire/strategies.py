"""Hypothesis strategies for remoting commands."""

from __future__ import annotations

from hypothesis import strategies as st

from reconsume.wire.codes import LanguageCode, SerializeType
from reconsume.wire.command import RemotingCommand

INT32 = st.integers(-(2**31), 2**31 - 1)
# Any Unicode scalar value that UTF-8 can carry (no lone surrogates).
text = st.text(st.characters(codec="utf-8"), max_size=40)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    kind = draw(st.sampled_from(SerializeType)) if serialize_type is None else serialize_type
    return RemotingCommand(
        code=draw(st.integers(0, 32767)),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | text),
        ext_fields=draw(st.dictionaries(text, text, max_size=6)),
        body=draw(st.binary(max_size=300)),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(st.integers(0, 32767)),
        serialize_type=kind,
    )


def normalised(cmd: RemotingCommand) -> RemotingCommand:
    """What a command decodes as: the binary header, like Java, reads an empty remark as
    null."""
    if cmd.serialize_type is SerializeType.ROCKETMQ and cmd.remark == "":
        return RemotingCommand(
            code=cmd.code,
            opaque=cmd.opaque,
            flag=cmd.flag,
            remark=None,
            ext_fields=cmd.ext_fields,
            body=cmd.body,
            language=cmd.language,
            version=cmd.version,
            serialize_type=cmd.serialize_type,
        )
    return cmd
