"""Offsets a group acknowledged past its committed offset (reconsume's ACK_QUEUE_OFFSETS and
QUERY_ACKED_OFFSETS; the broker side is :mod:`reconsume.broker.acked_offsets`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from reconsume.client.broker_api import BrokerApi
from reconsume.client.routes import MessageQueue
from reconsume.errors import RemotingError
from reconsume.message.offset_ranges import Range, covered
from reconsume.wire.broker_headers import QueryConsumerOffsetRequestHeader
from reconsume.wire.codes import RequestCode, ResponseCode


@dataclass(frozen=True, slots=True)
class Acked:
    """A group's committed offset of a queue and the ranges it acknowledged past it."""

    committed: int
    ranges: tuple[Range, ...] = ()

    def backlog(self, high: int) -> int:
        """Offsets below ``high`` neither committed nor acknowledged."""
        low = min(self.committed, high)
        return high - low - covered(self.ranges, low, high)


def _fields(group: str, queue: MessageQueue) -> dict[str, str]:
    header = QueryConsumerOffsetRequestHeader(
        consumer_group=group, topic=queue.topic, queue_id=queue.queue_id
    )
    return header.to_ext_fields()


def _decode(body: bytes | None, what: str) -> Acked:
    try:
        document = json.loads(body or b"")
        ranges = tuple((int(s), int(e)) for s, e in document["acked"])
        return Acked(int(document["committedOffset"]), ranges)
    except (ValueError, TypeError, KeyError) as exc:
        raise RemotingError(f"{what}: the broker's answer does not decode ({exc})") from exc


async def query_acked(
    api: BrokerApi, address: str, group: str, queue: MessageQueue
) -> Acked | None:
    """What ``group`` committed and acknowledged of ``queue`` on the broker at ``address``;
    None from a broker that does not know the request (an older version)."""
    what = f"acknowledged offsets of {group} on {queue}"
    response = await api.call(address, RequestCode.QUERY_ACKED_OFFSETS, _fields(group, queue))
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return None
    if response.code != ResponseCode.SUCCESS:
        raise RemotingError(f"{what} at {address}: {response.remark}")
    return _decode(response.body, what)


async def ack_offsets(
    api: BrokerApi, address: str, group: str, queue: MessageQueue, ranges: list[Range]
) -> Acked:
    """Acknowledge ``ranges`` of ``queue`` for ``group``: what reaches its committed offset
    moves it, the rest is held past it."""
    what = f"acknowledging offsets of {group} on {queue}"
    body = json.dumps({"ranges": [list(r) for r in ranges]}).encode()
    response = await api.checked(
        address, RequestCode.ACK_QUEUE_OFFSETS, _fields(group, queue), body, what=what
    )
    return _decode(response.body, what)
