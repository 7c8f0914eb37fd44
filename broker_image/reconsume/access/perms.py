"""Permissions and resources as Apache RocketMQ's ACL names them (``Permission``,
``PlainAccessResource``): a consumer group ``g`` is the resource ``%RETRY%g``, so a request on
the group's retry topic is checked as a request on the group; its dead-letter topic ``%DLQ%g``
is checked as the group too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntFlag

from reconsume.message.names import RETRY_GROUP_TOPIC_PREFIX, group_of
from reconsume.wire.command import RemotingCommand


class Perm(IntFlag):
    """RocketMQ's ``Permission`` bits. ANY is never configured: it is what a request asks for
    when either PUB or SUB will do."""

    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


def perm_name(perm: int) -> str:
    """``PUB``, ``SUB``, ``PUB|SUB``, ``DENY`` or ``ANY``, as the ACL file spells them."""
    if perm & Perm.DENY:
        return "DENY"
    names = [name for name, bit in (("PUB", Perm.PUB), ("SUB", Perm.SUB)) if perm & bit]
    return "|".join(names) or ("ANY" if perm & Perm.ANY else "DENY")


def allows(have: int, need: int) -> bool:
    """RocketMQ's ``Permission.checkPermission``: DENY refuses everything; ANY is satisfied by
    PUB or SUB; otherwise one needed bit must be granted."""
    if have & Perm.DENY:
        return False
    if need & Perm.ANY:
        return bool(have & (Perm.PUB | Perm.SUB))
    return bool(need & have)


def group_resource(group: str) -> str:
    """A consumer group as a resource: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def topic_resource(topic: str) -> str:
    """A topic as a resource: the topic, or its group for a retry or dead-letter topic."""
    group = group_of(topic)
    return topic if group is None else group_resource(group)


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


REFUSAL_REASONS = (
    "unsigned",
    "unknown_account",
    "bad_signature",
    "not_admin",
    "no_permission",
    "malformed",
)
"""Why a request is refused, as metrics label it."""

Needs = list[tuple[str, int]]
"""(resource, permission) pairs a request needs."""


@dataclass(frozen=True)
class Rules:
    """What each request code a server serves needs."""

    admin_codes: frozenset[int]
    """Codes only an account with ``admin = true`` may send."""
    required: Callable[[RemotingCommand], Needs]
    """The (resource, permission) pairs of a request, empty when a valid signature is enough;
    raises :class:`~reconsume.errors.InvalidArgumentError` when its header or body does not
    parse (as its handler would)."""
    open_codes: frozenset[int] = frozenset()
    """Codes anyone may send, signed or not (the name server's route queries)."""
