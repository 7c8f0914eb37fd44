"""The Apache RocketMQ 4.x remoting protocol: frames, codes, headers, errors, transport."""

from reconsume.wire.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from reconsume.wire.command import RemotingCommand
from reconsume.wire.frame import MAX_FRAME_BYTES, FrameReader, decode_frame, encode_frame

__all__ = [
    "MAX_FRAME_BYTES",
    "FrameReader",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_frame",
    "encode_frame",
]
