"""Real, unchanged RocketMQ clients against a reconsume name server and broker with access
control on (``--acl-file``, docs/security.md). Each signs its requests the way it signs them for
Apache RocketMQ's plain ACL and is served, without one refusal counted by the broker; unsigned,
signed with a wrong secret key, or signed by an account without the permission, it is refused
with NO_PERMISSION (16) and a remark saying why, and nothing is stored.

* Apache RocketMQ's Java client 4.9.8 with ``AclClientRPCHook(new SessionCredentials(ak, sk))``
  (``java/``, ``--access-key``/``--secret-key``): sends, a push consumer, failures retried
  through ``%RETRY%<group>`` into ``%DLQ%<group>``.
* mqadmin 4.9.8 with ``accessKey``/``secretKey`` in ``conf/tools.yml`` under ROCKETMQ_HOME:
  creating and inspecting a topic.
* ali-ons with its ``accessKey``/``secretKey`` options (``ali_ons/``): produce and consume.
* rocketmq-client-go with ``primitive.Credentials`` (``go/``): send and consume.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.routes import MessageQueue
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.signing import Credentials

from ..integration.wire_client import eventually
from ..scratch import module_dir
from .acl_support import (
    ADMIN,
    APP,
    BROKER,
    CLUSTER,
    FORGED,
    GROUPS,
    QUEUES,
    READER,
    TOPICS,
    acl_cluster,
    broker_of,
    mqadmin_home,
    read_signed,
    refusals,
    refused_since,
    topic_configs,
)
from .ali_ons_support import DRIVER_TIMEOUT_S as ALI_ONS_TIMEOUT_S
from .ali_ons_support import DriverRun as AliOnsRun
from .ali_ons_support import background_consumer, check_protocol, driver_command, parse_events
from .ali_ons_support import run_driver as run_ali_ons
from .conftest import GoClient, JavaClient, Mqadmin, NodeProject
from .driver_support import DriverRun, Event, once_each
from .go_client_support import run_driver as run_go_driver
from .java_client_support import CONSUMING
from .java_client_support import check_protocol as check_java_protocol
from .java_client_support import run_driver as run_java
from .mqadmin_output import outputs, run, table
from .servers import Cluster

JAVA_TOPIC, ALI_ONS_TOPIC, GO_TOPIC = TOPICS
JAVA_GROUP, ALI_ONS_GROUP, GO_GROUP, JAVA_SEND_GROUP = GROUPS
MQADMIN_TOPIC = "acl-mqadmin"
MQADMIN_GROUP = "acl_mqadmin_group"
COUNT = 10
MAX_RECONSUME = 2

REFUSED = [
    pytest.param(None, "unsigned", "carries no AccessKey", id="unsigned"),
    pytest.param(
        READER, "no_permission", f"account {READER.access_key} has no PUB on topic", id="no-pub"
    ),
    pytest.param(
        FORGED,
        "bad_signature",
        f"signature check failed for account {APP.access_key}",
        id="wrong-secret",
    ),
]
"""Who sends (no one: unsigned), the broker's refusal reason, and what its remark says."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_dir(tmp_path_factory, "acl-clients") as root, acl_cluster(root) as started:
        yield started


def keys(credentials: Credentials | None) -> dict[str, str]:
    """The drivers' options that sign with ``credentials`` (none: unsigned)."""
    if credentials is None:
        return {}
    return {"access-key": credentials.access_key, "secret-key": credentials.secret_key}


def depth(cluster: Cluster, topic: str) -> int:
    """Messages stored in ``topic`` (asked by the admin)."""

    async def ask() -> int:
        async with AdminClient([cluster.namesrv.address], credentials=ADMIN) as admin:
            return await admin.topic_depth(topic)

    return asyncio.run(ask())


# ------------------------------------------------------------------ Java client
def test_java_client_with_credentials_sends_consumes_and_dead_letters(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    before = refusals(cluster)
    run = run_java(
        java_client, cluster, "retry", tmp_path, topic=JAVA_TOPIC, group=JAVA_GROUP,
        queues=QUEUES, retry_queues=1, count=COUNT, max_reconsume=MAX_RECONSUME,
        prefix="signed", **keys(APP),
    )  # fmt: skip

    # Every answer it waited for was SUCCESS; the broker refused nothing it did not wait for.
    check_java_protocol(run, CONSUMING | {RequestCode.CONSUMER_SEND_MSG_BACK})
    assert refused_since(cluster, before) == {}

    sent = sorted(run["sent"], key=lambda s: s["index"])
    assert [(s["index"], s["status"]) for s in sent] == [(i, "SEND_OK") for i in range(COUNT)]
    deliveries: dict[str, list[Event]] = defaultdict(list)
    for r in run["received"]:
        deliveries[r["body"]].append(r)
    for s in sent:
        got = [(r["reconsumeTimes"], r["result"]) for r in deliveries[s["body"]]]
        if s["index"] % 2 == 0:  # failed on every delivery: 1 + MAX_RECONSUME of them
            assert got == [(n, "RECONSUME_LATER") for n in range(MAX_RECONSUME + 1)]
        else:  # failed once, consumed from the retry topic
            assert got == [(0, "RECONSUME_LATER"), (1, "CONSUME_SUCCESS")]

    # The always-failing messages are the group's dead letters, once each.
    failing = {s["body"]: s for s in sent if s["index"] % 2 == 0}
    letters = read_signed(cluster, dead_letter_topic(JAVA_GROUP), len(failing))
    assert sorted(m.body.decode() for m in letters) == sorted(failing)
    for letter in letters:
        s = failing[letter.body.decode()]
        assert (letter.reconsume_times, letter.uniq_key) == (MAX_RECONSUME + 1, s["msgId"])
        assert letter.properties["DLQ_ORIGIN_TOPIC"] == JAVA_TOPIC


def test_java_client_with_credentials_sends_batches_delayed_and_compressed_messages(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    """The signature covers the body as sent: a batch (SEND_BATCH_MESSAGE), bodies the
    producer compressed, and messages with a delay level."""
    before = refusals(cluster)
    run = run_java(
        java_client, cluster, "send", tmp_path, topic=JAVA_TOPIC, group=JAVA_SEND_GROUP,
        queues=QUEUES, count=COUNT, large_every=3, batches=2, batch_size=5, delay_levels="1,2",
        per_level=1, prefix="signed send", **keys(APP),
    )  # fmt: skip

    check_java_protocol(run, CONSUMING | {RequestCode.SEND_BATCH_MESSAGE})
    assert refused_since(cluster, before) == {}
    bodies = [s["body"] for s in run["sent"]] + [b for s in run["sentBatch"] for b in s["bodies"]]
    assert len(bodies) == COUNT + 2 + 2 * 5
    assert {s["status"] for s in run["sent"] + run["sentBatch"]} == {"SEND_OK"}
    received = {r["body"] for r in run["received"]}
    assert received >= set(bodies)


@pytest.mark.parametrize(("who", "reason", "remark"), REFUSED)
def test_java_client_send_is_refused_without_the_right_credentials(
    java_client: JavaClient,
    cluster: Cluster,
    tmp_path: Path,
    who: Credentials | None,
    reason: str,
    remark: str,
) -> None:
    stored = depth(cluster, JAVA_TOPIC)
    before = refusals(cluster)
    run = run_java(
        java_client, cluster, "sendOnce", tmp_path, topic=JAVA_TOPIC, group=JAVA_GROUP,
        prefix="refused", **keys(who),
    )  # fmt: skip

    assert not run["sent"], run.explain()
    (failed,) = run["sendFailed"]
    assert failed["responseCode"] == ResponseCode.NO_PERMISSION, failed
    assert "CODE: 16" in failed["cause"], failed
    assert remark in failed["cause"], failed
    sends = [e for e in run["response"] if e["code"] == RequestCode.SEND_MESSAGE_V2]
    assert sends, run.explain()
    for answer in sends:
        assert answer["responseCode"] == ResponseCode.NO_PERMISSION
        assert remark in answer["remark"]
    assert refused_since(cluster, before).get(reason, 0) >= len(sends)
    assert depth(cluster, JAVA_TOPIC) == stored


# ------------------------------------------------------------------ mqadmin
def test_mqadmin_with_admin_credentials_creates_a_topic_and_a_group_and_reads_them(
    mqadmin: Mqadmin, cluster: Cluster, tmp_path: Path
) -> None:
    tool = mqadmin_home(mqadmin, tmp_path / "home", ADMIN)
    ns, broker = cluster.namesrv.address, broker_of(cluster).address
    before = refusals(cluster)

    async def scenario() -> list[str]:
        created = await outputs(
            tool,
            ["updateTopic", "-n", ns, "-c", CLUSTER, "-t", MQADMIN_TOPIC, "-r", "2", "-w", "2"],
            ["updateSubGroup", "-n", ns, "-c", CLUSTER, "-g", MQADMIN_GROUP],
            # The group's retry topic, which consumerProgress asks the route of (a consumer's
            # heartbeat would have the broker create it).
            ["updateTopic", "-n", ns, "-c", CLUSTER, "-t", retry_topic(MQADMIN_GROUP), "-r", "1",
             "-w", "1"],
        )  # fmt: skip
        async with AdminClient([ns], credentials=ADMIN) as admin:
            for routed in (MQADMIN_TOPIC, retry_topic(MQADMIN_GROUP)):
                await eventually(partial(admin.route, routed), what=f"route of {routed}")
            queue = MessageQueue(MQADMIN_TOPIC, BROKER, 0)
            await admin.update_consumer_offset(MQADMIN_GROUP, queue, 0)
        read = await outputs(
            tool,
            ["consumerProgress", "-n", ns, "-g", MQADMIN_GROUP],
            ["brokerStatus", "-n", ns, "-b", broker],
        )
        return created[:2] + read

    topic, group, progress, status = asyncio.run(scenario())
    assert topic.splitlines()[0] == f"create topic to {broker} success."
    assert group.splitlines()[0] == f"create subscription group to {broker} success."
    assert MQADMIN_TOPIC in asyncio.run(topic_configs(cluster))
    # Topic, broker, queue, broker offset, consumer offset, client, diff, last time.
    rows = table(progress, columns=7)
    assert {(row[0], row[1], row[3], row[4]) for row in rows} == {(MQADMIN_TOPIC, BROKER, "0", "0")}
    assert "Diff Total: 0" in progress.splitlines()
    assert "brokerVersionDesc" in status
    assert refused_since(cluster, before) == {}


@pytest.mark.parametrize(
    ("who", "reason", "remark"),
    [
        pytest.param(None, "unsigned", "carries no AccessKey", id="no-tools-yml"),
        pytest.param(
            READER, "not_admin", f"account {READER.access_key} is not an admin", id="not-admin"
        ),
    ],
)
def test_mqadmin_update_topic_is_refused_without_admin_credentials(
    mqadmin: Mqadmin,
    cluster: Cluster,
    tmp_path: Path,
    who: Credentials | None,
    reason: str,
    remark: str,
) -> None:
    tool = mqadmin_home(mqadmin, tmp_path / "home", who)
    topic = f"acl-mqadmin-{reason}"
    before = refusals(cluster)
    ns = cluster.namesrv.address
    refused = asyncio.run(run(tool, "updateTopic", "-n", ns, "-c", CLUSTER, "-t", topic))

    # mqadmin exits 0 either way; it prints the broker's answer in the trace of the failure.
    trace = "\n".join(refused.failure())
    assert "CODE: 16" in trace, refused
    assert remark in trace, refused
    assert f"create topic to {broker_of(cluster).address} success." not in refused.stdout
    assert topic not in asyncio.run(topic_configs(cluster))
    assert refused_since(cluster, before).get(reason, 0) >= 1


# ------------------------------------------------------------------ ali-ons
def test_ali_ons_with_credentials_produces_and_consumes(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    before = refusals(cluster)
    run = run_ali_ons(
        ali_ons, "roundtrip", namesrv=cluster.namesrv.address, topic=ALI_ONS_TOPIC,
        group=ALI_ONS_GROUP, count=COUNT, **keys(APP),
    )  # fmt: skip

    check_protocol(run, {RequestCode.SEND_MESSAGE_V2, RequestCode.HEART_BEAT,
                         RequestCode.PULL_MESSAGE, RequestCode.UNREGISTER_CLIENT})  # fmt: skip
    assert [e for e in run["rpc"] if e.get("responseCode") == ResponseCode.NO_PERMISSION] == []
    assert refused_since(cluster, before) == {}
    assert {s["status"] for s in run["sent"]} == {"SEND_OK"}
    assert sorted(r["body"] for r in run["received"]) == sorted(s["body"] for s in run["sent"])
    assert len(run["sent"]) == COUNT


def _refused_rpcs(run: AliOnsRun, code: int, remark: str) -> list[Event]:
    answers = [e for e in run["rpc"] if e["code"] == code and "responseCode" in e]
    for answer in answers:
        assert answer["responseCode"] == ResponseCode.NO_PERMISSION, answer
        assert remark in answer["remark"], answer
    return answers


@pytest.mark.parametrize(("who", "reason", "remark"), REFUSED)
def test_ali_ons_produce_is_refused_without_the_right_credentials(
    ali_ons: NodeProject, cluster: Cluster, who: Credentials | None, reason: str, remark: str
) -> None:
    stored = depth(cluster, ALI_ONS_TOPIC)
    before = refusals(cluster)
    options = {
        "namesrv": cluster.namesrv.address, "topic": ALI_ONS_TOPIC, "group": ALI_ONS_GROUP,
        "count": 1, "concurrency": 1, "timeout-ms": (ALI_ONS_TIMEOUT_S - 10) * 1000, **keys(who),
    }  # fmt: skip
    completed = subprocess.run(
        driver_command(ali_ons, "produce", options),
        cwd=ali_ons.directory,
        capture_output=True,
        text=True,
        timeout=ALI_ONS_TIMEOUT_S,
        check=False,
    )
    run = AliOnsRun(completed.returncode, parse_events(completed.stdout), completed.stderr)

    # The send fails (after ali-ons' retries) and the driver with it.
    assert run.returncode == 1, run.explain()
    assert run["fatal"], run.explain()
    assert not run["sent"], run.explain()
    sends = _refused_rpcs(run, RequestCode.SEND_MESSAGE_V2, remark)
    assert sends, run.explain()
    assert refused_since(cluster, before).get(reason, 0) >= len(sends)
    assert depth(cluster, ALI_ONS_TOPIC) == stored


def test_ali_ons_consumer_without_credentials_is_refused(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    before = refusals(cluster)
    with background_consumer(
        ali_ons, namesrv=cluster.namesrv.address, topic=ALI_ONS_TOPIC, group=ALI_ONS_GROUP,
        instance="unsigned",
    ) as consumer:  # fmt: skip
        consumer.wait_for(
            lambda: _refused_rpcs(consumer.snapshot(), RequestCode.HEART_BEAT, "no AccessKey"),
            "a refused heartbeat",
        )
    assert consumer["received"] == []
    assert refused_since(cluster, before).get("unsigned", 0) >= 1


# ------------------------------------------------------------------ Go client
def run_go(
    go_client: GoClient,
    cluster: Cluster,
    scenario: str,
    state_dir: Path,
    options: dict[str, object],
) -> DriverRun:
    """:func:`.go_client_support.run_driver`, with options named as the driver names them."""
    return run_go_driver(go_client, cluster, scenario, state_dir, **options)


def test_go_client_with_credentials_sends_and_consumes(
    go_client: GoClient, cluster: Cluster, tmp_path: Path
) -> None:
    before = refusals(cluster)
    run = run_go(
        go_client, cluster, "send", tmp_path,
        {"topic": GO_TOPIC, "group": GO_GROUP, "queues": QUEUES, "count": COUNT,
         "prefix": "signed", **keys(APP)},
    )  # fmt: skip

    assert refused_since(cluster, before) == {}
    sent = run["sent"]
    assert [(s["index"], s["status"]) for s in sent] == [(i, "SEND_OK") for i in range(COUNT)]
    assert set(once_each(run["received"])) == {s["body"] for s in sent}


@pytest.mark.parametrize(("who", "reason", "remark"), REFUSED)
def test_go_client_send_is_refused_without_the_right_credentials(
    go_client: GoClient,
    cluster: Cluster,
    tmp_path: Path,
    who: Credentials | None,
    reason: str,
    remark: str,
) -> None:
    stored = depth(cluster, GO_TOPIC)
    before = refusals(cluster)
    run = run_go(
        go_client, cluster, "sendOnce", tmp_path,
        {"topic": GO_TOPIC, "group": GO_GROUP, "prefix": "refused", **keys(who)},
    )  # fmt: skip

    assert not run["sent"], run.explain()
    (failed,) = run["sendFailed"]
    assert "CODE: 16" in failed["error"], failed
    assert remark in failed["error"], failed
    assert refused_since(cluster, before).get(reason, 0) >= 1
    assert depth(cluster, GO_TOPIC) == stored
