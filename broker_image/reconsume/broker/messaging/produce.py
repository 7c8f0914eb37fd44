"""SendMessage: each message of the request becomes the SEND_MESSAGE a 4.x producer would have
sent, stored by the broker's own send path.

The 5.x fields land where the broker and 4.x consumers look for them (as Apache RocketMQ's
proxy puts them): the client's message id in ``UNIQ_KEY`` (a 4.x consumer's msgId), the tag
in ``TAGS``, keys in ``KEYS``, a FIFO message's group in ``__SHARDINGKEY``, a delivery time in
``TIMER_DELIVER_MS`` (the timer engine), user properties as they are. A GZIP body is stored
inflated, so every kind of consumer reads it. A message is refused before it is stored when
it is not what its type says (a FIFO message without a group, a DELAY message without a
delivery time), with the proxy's codes.
"""

from __future__ import annotations

import gzip
import time
import zlib

from reconsume.broker.messaging.status import Refused, from_remoting, status
from reconsume.message import properties as props
from reconsume.message.names import DEFAULT_TOPIC
from reconsume.wire.broker_headers import SendMessageRequestHeader, SendMessageResponseHeader
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.v2 import definition_pb2 as pb
from reconsume.wire.v2 import service_pb2 as spb

PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
"""RocketMQ 5's clients name no producer group; the proxy sends under this one."""
_FORBIDDEN_TAG_CHARS = ("|", "\x00")
MAX_MESSAGE_GROUP_LENGTH = 64
"""The proxy's ``maxMessageGroupSize``."""


def _body(message: pb.Message) -> bytes:
    encoding = message.system_properties.body_encoding
    if encoding == pb.GZIP:
        try:
            return gzip.decompress(message.body)
        except (OSError, EOFError, zlib.error) as exc:
            raise Refused(pb.MESSAGE_CORRUPTED, f"the GZIP body does not inflate: {exc}") from exc
    return message.body


def _properties(message: pb.Message, max_delay_ms: int) -> dict[str, str]:
    system = message.system_properties
    found = dict(message.user_properties)
    if not system.message_id:
        raise Refused(pb.ILLEGAL_MESSAGE_ID, "the message has no message id")
    found[props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    if system.HasField("tag"):
        if not system.tag.strip() or any(c in system.tag for c in _FORBIDDEN_TAG_CHARS):
            raise Refused(pb.ILLEGAL_MESSAGE_TAG, f"tag {system.tag!r} is not allowed")
        found[props.TAGS] = system.tag
    if system.keys:
        if any(not key.strip() for key in system.keys):
            raise Refused(pb.ILLEGAL_MESSAGE_KEY, "a message key is blank")
        found[props.KEYS] = " ".join(system.keys)
    kind = system.message_type
    if system.HasField("message_group"):
        if kind not in (pb.FIFO, pb.MESSAGE_TYPE_UNSPECIFIED):
            raise Refused(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only FIFO messages have a group")
        group = system.message_group
        if not group or len(group) > MAX_MESSAGE_GROUP_LENGTH:
            raise Refused(pb.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is not allowed")
        found[props.SHARDING_KEY] = group
    elif kind == pb.FIFO:
        raise Refused(pb.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
    if system.HasField("delivery_timestamp"):
        if kind not in (pb.DELAY, pb.MESSAGE_TYPE_UNSPECIFIED):
            raise Refused(
                pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only DELAY messages have a delivery time"
            )
        stamp = system.delivery_timestamp
        deliver_ms = stamp.seconds * 1000 + stamp.nanos // 1_000_000
        ahead_ms = deliver_ms - int(time.time() * 1000)
        if ahead_ms > max_delay_ms:
            raise Refused(
                pb.ILLEGAL_DELIVERY_TIME,
                f"the delivery time is {ahead_ms} ms ahead; the longest delay is {max_delay_ms} ms",
            )
        found[props.TIMER_DELIVER_MS] = str(deliver_ms)
    elif kind == pb.DELAY:
        raise Refused(pb.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp")
    if kind == pb.TRANSACTION:
        raise Refused(pb.UNSUPPORTED, "transactional messages are not supported")
    found[props.WAIT_STORE_MSG_OK] = "true"
    return found


_FIELDS = {attr: name for attr, name, _kind, _required in SendMessageRequestHeader._fields()}
_TOPIC, _QUEUE_ID = _FIELDS["topic"], _FIELDS["queue_id"]
_BORN, _PROPERTIES = _FIELDS["born_timestamp"], _FIELDS["properties"]
_HEADER = SendMessageRequestHeader(
    producer_group=PRODUCER_GROUP,
    topic=DEFAULT_TOPIC,
    default_topic=DEFAULT_TOPIC,
    default_topic_queue_nums=4,
    queue_id=0,
    sys_flag=0,
    born_timestamp=0,
    flag=0,
    properties="",
    reconsume_times=0,
).to_ext_fields()
"""The header of every send, as its extFields; each message sets its topic, queue (the client
picked it from the route, a FIFO group's), birth time and properties. Filled in rather than
built as a header and written: that costs more than the rest of the conversion."""
_OK = status(pb.OK)


def send_request(message: pb.Message, max_delay_ms: int) -> RemotingCommand:
    """The SEND_MESSAGE storing ``message``; raises :class:`Refused` for one that is not
    what its type says or is due further ahead than ``max_delay_ms``."""
    system = message.system_properties
    body = _body(message)
    if not body:
        raise Refused(pb.MESSAGE_BODY_EMPTY, "the message body is empty")
    born_ms = system.born_timestamp.ToMilliseconds() if system.HasField("born_timestamp") else 0
    ext = _HEADER.copy()
    ext[_TOPIC] = message.topic.name
    ext[_QUEUE_ID] = str(system.queue_id)
    ext[_BORN] = str(born_ms)
    ext[_PROPERTIES] = props.encode_properties(_properties(message, max_delay_ms))
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body=body)


def entry(message: pb.Message, response: RemotingCommand) -> spb.SendResultEntry:
    """The result of one message from the broker's answer to its SEND_MESSAGE."""
    if response.code != ResponseCode.SUCCESS:
        return spb.SendResultEntry(status=from_remoting(response.code, response.remark))
    header = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
    return spb.SendResultEntry(
        status=_OK,
        message_id=message.system_properties.message_id,
        transaction_id=header.transaction_id or "",
        offset=header.queue_offset,
    )
