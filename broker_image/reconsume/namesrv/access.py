"""What each request code the name server serves needs when its access control is on.

Apache RocketMQ's name server checks nothing. Here the requests that change what clients are
told need an admin account: a broker's registration and unregistration (the brokers sign with
the cluster's admin credential, so a process that merely reaches the port cannot announce
itself as a broker and draw clients' traffic), deleting a topic's routes, and writing the KV
configuration. The queries stay open to every client, signed or not, as in RocketMQ: a route
names brokers and queues, not messages, and every client asks for routes before anything else
(clients that sign only the requests to brokers keep working). The brokers decide who may
send, consume and administer.
"""

from __future__ import annotations

from reconsume.access.perms import Needs, Rules
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand

NAMESRV_ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
    }
)
NAMESRV_OPEN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_TOPICS_BY_CLUSTER,
        RequestCode.GET_KV_CONFIG,
    }
)


def _nothing(_request: RemotingCommand) -> Needs:
    return []


NAMESRV_RULES = Rules(
    admin_codes=NAMESRV_ADMIN_CODES, required=_nothing, open_codes=NAMESRV_OPEN_CODES
)
