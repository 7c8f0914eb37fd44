"""Every command survives encode → decode in both serializations, whole or cut into any
chunks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconsume.wire.codes import SerializeType
from reconsume.wire.command import RemotingCommand
from reconsume.wire.frame import FrameReader, decode_frame, decode_payload, encode_frame
from tests.unit.wire.strategies import commands, normalised


@given(commands(SerializeType.JSON))
def test_json_round_trip(cmd: RemotingCommand) -> None:
    assert decode_frame(encode_frame(cmd)) == cmd


@given(commands(SerializeType.ROCKETMQ))
def test_rocketmq_round_trip(cmd: RemotingCommand) -> None:
    assert decode_frame(encode_frame(cmd)) == normalised(cmd)


@given(commands())
def test_payload_is_frame_without_length(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_payload(frame[4:]) == normalised(cmd)


@given(commands())
def test_serialization_type_is_the_top_byte(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    assert frame[4] == cmd.serialize_type
    header_length = int.from_bytes(frame[5:8], "big")
    assert frame[8 + header_length :] == cmd.body


@given(st.lists(commands(), max_size=8), st.data())
def test_reader_any_chunking(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    reader = FrameReader()
    out: list[RemotingCommand] = []
    for chunk in chunks:
        out.extend(reader.feed(chunk))
    assert out == [normalised(c) for c in cmds]
    assert reader.pending_bytes == 0


@given(st.lists(commands(), min_size=1, max_size=5))
def test_reader_byte_by_byte(cmds: list[RemotingCommand]) -> None:
    frames = [encode_frame(c) for c in cmds]
    ends = {sum(len(f) for f in frames[: i + 1]) for i in range(len(frames))}
    stream = b"".join(frames)
    reader = FrameReader()
    out: list[RemotingCommand] = []
    for i in range(len(stream)):
        got = reader.feed(stream[i : i + 1])
        # a command appears exactly when its last byte arrives
        assert len(got) == (1 if i + 1 in ends else 0)
        out.extend(got)
    assert out == [normalised(c) for c in cmds]


@given(commands())
def test_reader_keeps_partial_frame(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    reader = FrameReader()
    assert reader.feed(frame[:-1]) == []
    assert reader.pending_bytes == len(frame) - 1
    assert reader.feed(frame[-1:]) == [normalised(cmd)]
    assert reader.pending_bytes == 0
