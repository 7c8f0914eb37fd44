"""A group's declared consume type (its ``consume.type`` attribute, ConsumerGroup
``spec.consumeType``): which kind of client may move its committed offset.

RocketMQ 4.x consumers move it themselves (PULL_MESSAGE's commit flag, UPDATE_CONSUMER_OFFSET);
RocketMQ 5 clients over gRPC move it through the pop engine's leases. Both on one group fight
over that one offset and hand messages out twice, so a group declared ``POP`` refuses 4.x
pulls and offset commits, and one declared ``PULL`` refuses ReceiveMessage. ``ANY`` (no
attribute) serves both. Each function answers why a request is refused, or None.
"""

from __future__ import annotations

from reconsume.message.configs import CONSUME_POP, CONSUME_PULL, SubscriptionGroupConfig

POP_CLIENTS = "RocketMQ 5 clients over gRPC only"
PULL_CLIENTS = "RocketMQ 4.x pull and push consumers only"


def remoting_refusal(group: SubscriptionGroupConfig, request: str) -> str | None:
    """Why a 4.x consumer's ``request`` ("pulls", "offset commits") of ``group`` is refused:
    it is a POP group. The remark starts as Apache RocketMQ's for a group that may not
    consume (``subscription group no permission, <group>``)."""
    if not group.attributes or group.consume_type != CONSUME_POP:
        return None  # no attributes: the common case, without parsing anything
    return (
        f"subscription group no permission, {group.group_name}: its consume type is "
        f"{CONSUME_POP} ({POP_CLIENTS}), {request} are refused"
    )


def pop_refusal(group: SubscriptionGroupConfig) -> str | None:
    """Why a RocketMQ 5 client's ReceiveMessage of ``group`` is refused: it is a PULL group."""
    if not group.attributes or group.consume_type != CONSUME_PULL:
        return None
    return (
        f"group {group.group_name} may not be consumed by RocketMQ 5 clients: its consume "
        f"type is {CONSUME_PULL} ({PULL_CLIENTS})"
    )
