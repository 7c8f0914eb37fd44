"""The message model and the stored-record codec shared by every other layer."""

from reconsume.message.address import HostAddress
from reconsume.message.codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    encode_record,
    record_size,
)
from reconsume.message.decode import (
    check_record,
    decode_record,
    iter_records,
)
from reconsume.message.ids import UniqIdGenerator, offset_msg_id, parse_offset_msg_id, parse_uniq_id
from reconsume.message.model import Message, StoredMessage
from reconsume.message.properties import decode_properties, encode_properties

__all__ = [
    "BLANK_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE",
    "HostAddress",
    "Message",
    "StoredMessage",
    "UniqIdGenerator",
    "check_record",
    "decode_properties",
    "decode_record",
    "encode_properties",
    "encode_record",
    "iter_records",
    "offset_msg_id",
    "parse_offset_msg_id",
    "parse_uniq_id",
    "record_size",
]
