"""What the ACL compat tests share: a name server and a broker started with ``--acl-file``
(the broker signing its registration as the cluster's admin), the accounts of that file, the
broker's refusal counters, and its queues read back with the admin's signature."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from reconsume.access.perms import REFUSAL_REASONS
from reconsume.client.admin import AdminClient
from reconsume.message.model import StoredMessage
from reconsume.wire.signing import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials

from ..integration.cluster import SMALL_SEGMENTS
from ..integration.processes import ServerProcess, start_server
from ..integration.retry_support import TEST_DELAY_LEVELS, metric, read_queue, scrape_now
from ..integration.wire_client import BrokerClient, eventually
from .conftest import MQADMIN_DIR, Mqadmin
from .servers import Cluster, stop_cleanly

CLUSTER = "acl"
BROKER = "broker-a"
QUEUES = 4
"""Queues of each topic the tests create (one broker)."""

ADMIN = Credentials("cluster-admin", "admin-secret-0123456789")
APP = Credentials("acl-app", "app-secret-0123456789")
"""Publishes to and subscribes to :data:`TOPICS`, consumes as :data:`GROUPS`; nothing else."""
READER = Credentials("acl-reader", "reader-secret-0123456789")
"""Subscribes to :data:`TOPICS`: no PUB, no group, not an admin."""
FORGED = Credentials(APP.access_key, "not-the-app-secret-0123")
""":data:`APP`'s access key with a wrong secret key."""

TOPICS = ("acl-java", "acl-ali-ons", "acl-go")
GROUPS = ("acl_java_group", "acl_ali_ons_group", "acl_go_group", "acl_java_send_group")


def _perms(names: tuple[str, ...], perm: str) -> str:
    return "{ " + ", ".join(f'"{name}" = "{perm}"' for name in names) + " }"


ACL = f"""
[[accounts]]
access_key = "{ADMIN.access_key}"
secret_key = "{ADMIN.secret_key}"
admin = true

[[accounts]]
access_key = "{APP.access_key}"
secret_key = "{APP.secret_key}"
topic_perms = {_perms(TOPICS, "PUB|SUB")}
group_perms = {_perms(GROUPS, "SUB")}

[[accounts]]
access_key = "{READER.access_key}"
secret_key = "{READER.secret_key}"
topic_perms = {_perms(TOPICS, "SUB")}
"""


@contextmanager
def acl_cluster(root: Path, extra: Sequence[str] = ()) -> Iterator[Cluster]:
    """A name server and broker :data:`BROKER` (Sync flush, 64 MiB segments, the retry tests'
    delay levels, /metrics on an HTTP port), both with the ACL file :data:`ACL`, each asserted
    to exit 0 on SIGTERM at the end; :data:`TOPICS` created (by :data:`ADMIN`) and routed."""
    root.mkdir(parents=True, exist_ok=True)
    acl_file = root / "acl.toml"
    acl_file.write_text(ACL)
    config = root / "broker.toml"
    config.write_text(SMALL_SEGMENTS)
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0", "--acl-file", str(acl_file))
    cluster = Cluster(namesrv)
    try:
        cluster.brokers[BROKER] = start_server(
            "broker", "--listen", "127.0.0.1:0", "--namesrv", namesrv.address,
            "--store-dir", str(root / "store"), "--broker-name", BROKER, "--cluster", CLUSTER,
            "--flush", "Sync", "--config", str(config), "--delay-levels", TEST_DELAY_LEVELS,
            "--http-listen", "127.0.0.1:0", "--acl-file", str(acl_file), *extra,
            env={ACCESS_KEY_ENV: ADMIN.access_key, SECRET_KEY_ENV: ADMIN.secret_key},
        )  # fmt: skip
        asyncio.run(create_topics(cluster, TOPICS))
        yield cluster
    finally:
        stop_cleanly(cluster.brokers, namesrv)


def broker_of(cluster: Cluster) -> ServerProcess:
    return cluster.brokers[BROKER]


async def create_topics(cluster: Cluster, topics: tuple[str, ...]) -> None:
    """``topics``, :data:`QUEUES` queues each, created by :data:`ADMIN` and routed, once the
    broker's signed registration is in the name server's cluster info."""
    async with AdminClient([cluster.namesrv.address], credentials=ADMIN) as admin:
        await eventually(partial(admin.brokers, CLUSTER), what=f"a broker of cluster {CLUSTER}")
        for topic in topics:
            await admin.create_topic(topic, queues=QUEUES, cluster=CLUSTER)
            await eventually(partial(admin.route, topic), what=f"route of {topic}")


async def topic_configs(cluster: Cluster) -> set[str]:
    """The topics the broker has (asked by :data:`ADMIN`)."""
    async with AdminClient([cluster.namesrv.address], credentials=ADMIN) as admin:
        return set(await admin.topic_configs(broker_of(cluster).address))


def refusals(cluster: Cluster) -> dict[str, float]:
    """The broker's refused requests so far, by reason (``/metrics``)."""
    samples = scrape_now(broker_of(cluster))
    return {
        reason: metric(samples, "reconsume_acl_refused_requests_total", reason=reason)
        for reason in REFUSAL_REASONS
    }


def refused_since(cluster: Cluster, before: dict[str, float]) -> dict[str, float]:
    """The refusals counted since ``before`` (reasons with none left out)."""
    now = refusals(cluster)
    return {reason: now[reason] - before[reason] for reason in now if now[reason] > before[reason]}


def read_signed(cluster: Cluster, topic: str, count: int) -> list[StoredMessage]:
    """Queue 0 of ``topic`` on the broker, pulled with :data:`ADMIN`'s signature, once it holds
    ``count`` messages."""

    async def probe() -> list[StoredMessage] | None:
        async with BrokerClient() as client:
            client.remoting.signer = ADMIN.sign
            found = await read_queue(client, broker_of(cluster).address, topic)
        return found if len(found) >= count else None

    result: list[StoredMessage] = asyncio.run(eventually(probe, what=f"{count} in {topic}"))
    return result


def mqadmin_home(tool: Mqadmin, home: Path, credentials: Credentials | None) -> Mqadmin:
    """mqadmin with ROCKETMQ_HOME ``home``: the log configuration of ``mqadmin/conf`` and, with
    ``credentials``, ``conf/tools.yml`` naming them, which mqadmin 4.9.8 reads
    (``MQAdminStartup`` passes ``AclUtils.getAclRPCHook(ROCKETMQ_HOME + "/conf/tools.yml")`` to
    every subcommand: an ``AclClientRPCHook`` when the file names both keys, else none)."""
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(MQADMIN_DIR / "conf" / "logback_tools.xml", conf)
    if credentials is not None:
        (conf / "tools.yml").write_text(
            f"accessKey: {credentials.access_key}\nsecretKey: {credentials.secret_key}\n"
        )
    return Mqadmin(tool.java, tool.directory, home)
