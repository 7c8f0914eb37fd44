"""Who may call the gRPC service: RocketMQ 5's clients sign each call's ``x-mq-date-time``
with their secret key (``authorization: MQv2-HMAC-SHA1 Credential=<access key>,
SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1>``). The account and its permissions
are the broker's ACL file's, checked as for a remoting request
(:meth:`~reconsume.access.guard.AclGuard.check_grpc`): a send needs PUB on its topic; receiving,
acknowledging, changing an invisible duration and forwarding to the dead letters need SUB on
the group and on the topic; a route needs PUB or SUB on the topic. A refusal answers
UNAUTHORIZED (no, unknown or badly signed credential) or FORBIDDEN (a permission missing),
counted and logged as the remoting port's refusals are."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Iterable, Sequence
from hashlib import sha1

from reconsume.access.guard import AclGuard
from reconsume.access.perms import Perm, group_resource, topic_resource
from reconsume.broker.messaging.local import peer_of
from reconsume.broker.messaging.status import Refused
from reconsume.wire.h2.api import CallContext
from reconsume.wire.v2 import definition_pb2 as pb

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_HEADER = re.compile(
    r"MQv2-HMAC-SHA1\s+Credential=(?P<key>[^,\s]*),\s*SignedHeaders=(?P<headers>[^,\s]*),"
    r"\s*Signature=(?P<signature>[0-9A-Fa-f]+)\s*"
)
MAX_HEADER = 1024
"""A longer authorization header is refused unread."""

Needs = Sequence[tuple[str, Perm]]


def route_needs(topic: str) -> Needs:
    return [(topic_resource(topic), Perm.ANY)]


def send_needs(topics: Iterable[str]) -> Needs:
    return [(topic_resource(topic), Perm.PUB) for topic in dict.fromkeys(topics)]


def consume_needs(group: str, topic: str) -> Needs:
    needs = [(group_resource(group), Perm.SUB)]
    if topic:
        needs.append((topic_resource(topic), Perm.SUB))
    return needs


class Access:
    """The ACL check of each call, when the broker has access control on."""

    def __init__(self, guard: Callable[[], AclGuard | None]) -> None:
        self._guard = guard

    def check(self, context: CallContext, needs: Needs) -> None:
        """Raise :class:`Refused` unless the call's credential may do what ``needs`` says."""
        guard = self._guard()
        if guard is None:
            return
        headers = context.metadata
        header = headers.get(AUTHORIZATION, "")
        stamp = headers.get(DATE_TIME, "")
        match = _HEADER.fullmatch(header) if len(header) <= MAX_HEADER else None
        access_key = match.group("key") if match else ""
        signature = match.group("signature").lower() if match else ""

        def signed(secret_key: str) -> bool:
            if not stamp or match is None or DATE_TIME not in match.group("headers").split(";"):
                return False
            expected = hmac.new(secret_key.encode(), stamp.encode(), sha1).hexdigest()
            return hmac.compare_digest(expected, signature)

        refusal = guard.check_grpc(access_key, signed, peer_of(context.peer())[0], needs)
        if refusal is None:
            return
        code = pb.FORBIDDEN if refusal.reason == "no_permission" else pb.UNAUTHORIZED
        raise Refused(code, refusal.message)
