"""Stored messages as ``apache.rocketmq.v2.Message`` (Apache RocketMQ's ``GrpcConverter``):
what a 5.x consumer receives, whoever sent the message.

The message id is the producer's ``UNIQ_KEY`` (a 5.x id, or a 4.x client's), else the offset
message id; a retry or dead letter keeps its original's. The topic is the one it was sent to
(RETRY_TOPIC for a retry read from ``%RETRY%<group>``). The body digest is MD5, upper-case hex,
which the clients agree on: with CRC32 (the proxy's choice) the Java client expects the hex
without leading zeros and the Python client zero-padded to 8 digits, so one body in 16 reads
as corrupted to one of them. A compressed 4.x body is inflated first.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress

from reconsume.broker.messaging.leases import Lease
from reconsume.broker.messaging.times import duration, timestamp
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.model import StoredMessage
from reconsume.wire.v2 import definition_pb2 as pb

_SYSTEM = frozenset(
    {
        props.TAGS, props.KEYS, props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, props.SHARDING_KEY,
        props.TIMER_DELIVER_MS, props.RETRY_TOPIC, props.REAL_TOPIC, props.REAL_QUEUE_ID,
        props.ORIGIN_MESSAGE_ID, props.WAIT_STORE_MSG_OK, props.DELAY_TIME_LEVEL,
        props.TIMER_OUT_MS, props.MIN_OFFSET, props.MAX_OFFSET, props.CLUSTER,
    }
)  # fmt: skip
"""Properties the protocol carries in fields of its own, or the broker's bookkeeping."""


@functools.lru_cache(maxsize=4096)
def _ip_text(ip: bytes) -> str:
    """The text of a record's packed born address (the same few recur in every batch)."""
    return str(ipaddress.ip_address(ip))


@functools.lru_cache(maxsize=256)
def _host_text(host: HostAddress) -> str:
    return str(host)


def message_type(properties: dict[str, str]) -> pb.MessageType:
    if props.SHARDING_KEY in properties:
        return pb.FIFO
    if props.TIMER_DELIVER_MS in properties or props.DELAY_TIME_LEVEL in properties:
        return pb.DELAY
    return pb.NORMAL


def to_protocol(message: StoredMessage, lease: Lease, handle: str, invisible_ms: int) -> pb.Message:
    """``message`` as leased by ``lease`` (receipt handle ``handle``)."""
    properties = message.properties
    body = message.uncompressed_body()
    system = pb.SystemProperties(
        keys=message.keys,
        message_id=(
            properties.get(props.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            or properties.get(props.ORIGIN_MESSAGE_ID)
            or message.msg_id
        ),
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=message_type(properties),
        born_timestamp=timestamp(message.born_timestamp_ms),
        born_host=_ip_text(message.born_host.ip),
        store_timestamp=timestamp(message.store_timestamp_ms),
        store_host=_host_text(message.store_host),
        receipt_handle=handle,
        queue_id=lease.queue_id,
        queue_offset=lease.offset,
        invisible_duration=duration(invisible_ms),
        delivery_attempt=lease.attempt,
    )
    if message.tags is not None:
        system.tag = message.tags
    if props.SHARDING_KEY in properties:
        system.message_group = properties[props.SHARDING_KEY]
    if props.TIMER_DELIVER_MS in properties:
        system.delivery_timestamp.CopyFrom(timestamp(int(properties[props.TIMER_DELIVER_MS])))
    user = {k: v for k, v in properties.items() if k not in _SYSTEM}
    if props.REPROCESSED in properties and props.ORIGIN_MESSAGE_ID in properties:
        # A dead-letter job's re-send has an id of its own; the dead letter's stays visible.
        user[props.ORIGIN_MESSAGE_ID] = properties[props.ORIGIN_MESSAGE_ID]
    return pb.Message(
        topic=pb.Resource(name=properties.get(props.RETRY_TOPIC) or message.topic),
        user_properties=user,
        system_properties=system,
        body=body,
    )
