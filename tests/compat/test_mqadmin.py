"""Apache RocketMQ's admin CLI, mqadmin 4.9.8 (rocketmq-tools, unchanged), against one reconsume
name server and two Sync-flush brokers on 127.0.0.1.

Each test runs mqadmin commands, parses what they print and checks it against the brokers'
state as our own clients read it (``AdminClient``, the protocol-level ``BrokerClient``).
mqadmin runs with ``TZ=UTC`` (see ``mqadmin_output``), so the times it prints are UTC.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.listener import ConsumeFrom
from reconsume.client.producer import Producer
from reconsume.client.push import PushConsumer
from reconsume.client.routes import MessageQueue
from reconsume.client.settings import ConsumerSettings
from reconsume.message.configs import SubscriptionGroupConfig
from reconsume.message.decode import decode_record
from reconsume.message.ids import parse_offset_msg_id
from reconsume.message.model import Message
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import ResponseCode

from ..integration.cluster import Cluster, Collector, create_topic, send_all, start_cluster
from ..integration.wire_client import BrokerClient, eventually, ok, records
from .conftest import Mqadmin
from .mqadmin_output import (
    check_message,
    fastjson,
    key_values,
    outputs,
    sections,
    table,
    utc,
)

DELAY_LEVELS = "100ms 200ms 300ms 400ms"
"""Short delay levels: a retry (level 3 + reconsume times) is due within half a second."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """One name server and brokers ``broker-a`` and ``broker-b`` of cluster ``test``, stopped
    cleanly (SIGTERM, exit 0) at the end."""
    started = start_cluster(tmp_path, extra=("--delay-levels", DELAY_LEVELS))
    yield started
    for broker in started.brokers.values():
        assert broker.stop() == 0, "".join(broker.output)
    assert started.namesrv.stop() == 0, "".join(started.namesrv.output)


@pytest.mark.slow
def test_update_topic_then_list_and_route_it(mqadmin: Mqadmin, cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    broker_a, broker_b = cluster.brokers["broker-a"].address, cluster.brokers["broker-b"].address

    async def scenario() -> None:
        created = await outputs(
            mqadmin,
            ["updateTopic", "-n", ns, "-c", "test", "-t", "mq-orders", "-r", "3", "-w", "4"],
            ["updateTopic", "-n", ns, "-b", broker_b, "-t", "mq-audit", "-r", "2", "-w", "2",
             "-p", "4"],
        )  # fmt: skip
        lines = created[0].splitlines()
        assert sorted(lines[:2]) == sorted(
            f"create topic to {a} success." for a in (broker_a, broker_b)
        )
        assert lines[2] == (
            "TopicConfig [topicName=mq-orders, readQueueNums=3, writeQueueNums=4, perm=RW-, "
            "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
        )
        assert created[1].startswith(f"create topic to {broker_b} success.\n")

        async with AdminClient(cluster.name_servers) as admin:
            on_a, on_b = await admin.topic_configs(broker_a), await admin.topic_configs(broker_b)
            for configs in (on_a, on_b):
                orders = configs["mq-orders"]
                assert (orders.read_queue_nums, orders.write_queue_nums, orders.perm) == (3, 4, 6)
            audit = on_b["mq-audit"]
            assert (audit.read_queue_nums, audit.write_queue_nums, audit.perm) == (2, 2, 4)
            assert "mq-audit" not in on_a
            # A group with an offset in mq-orders is one "topicList -c" names.
            queue = MessageQueue("mq-orders", "broker-a", 0)
            await eventually(lambda: admin.route("mq-audit"), what="route of mq-audit")
            await admin.update_consumer_offset("mq-orders-consumer", queue, 0)

            listed, by_cluster, orders_route, audit_route = await outputs(
                mqadmin,
                ["topicList", "-n", ns],
                ["topicList", "-n", ns, "-c"],
                ["topicRoute", "-n", ns, "-t", "mq-orders"],
                ["topicRoute", "-n", ns, "-t", "mq-audit"],
            )
            topics = await admin.topics()
        assert sorted(listed.split()) == topics
        assert {"mq-orders", "mq-audit"} <= set(topics)
        plain = [t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))]
        groups = {"mq-orders": "mq-orders-consumer"}
        assert sorted(tuple(row) for row in table(by_cluster, columns=3)) == sorted(
            ("test", topic, groups.get(topic, "")) for topic in plain
        )

        async with BrokerClient() as client:
            for text, topic in ((orders_route, "mq-orders"), (audit_route, "mq-audit")):
                ours = await client.route(ns, topic)
                assert ours is not None
                assert fastjson(text) == ours
        assert fastjson(orders_route)["queueDatas"] == [
            {"brokerName": name, "perm": 6, "readQueueNums": 3, "topicSysFlag": 0,
             "writeQueueNums": 4}
            for name in ("broker-a", "broker-b")
        ]  # fmt: skip
        assert [b["brokerAddrs"] for b in fastjson(audit_route)["brokerDatas"]] == [{"0": broker_b}]

    asyncio.run(scenario())


@pytest.mark.slow
def test_update_sub_group_sets_what_the_retry_engine_uses(
    mqadmin: Mqadmin, cluster: Cluster
) -> None:
    ns = cluster.namesrv.address
    broker_a, broker_b = cluster.brokers["broker-a"].address, cluster.brokers["broker-b"].address
    group = "mq-retrying"

    async def scenario() -> None:
        # 4.9.8's options: -q retryQueueNums, -r retryMaxTimes, -m consumeFromMinEnable,
        # -d consumeBroadcastEnable, -s consumeEnable.
        retrying, disabled = await outputs(
            mqadmin,
            ["updateSubGroup", "-n", ns, "-c", "test", "-g", group, "-q", "2", "-r", "1",
             "-m", "true", "-d", "false"],
            ["updateSubGroup", "-n", ns, "-b", broker_a, "-g", "mq-paused", "-s", "false"],
        )  # fmt: skip
        lines = retrying.splitlines()
        assert sorted(lines[:2]) == sorted(
            f"create subscription group to {a} success." for a in (broker_a, broker_b)
        )
        assert lines[2] == (
            f"SubscriptionGroupConfig [groupName={group}, consumeEnable=true, "
            "consumeFromMinEnable=true, consumeBroadcastEnable=false, retryQueueNums=2, "
            "retryMaxTimes=1, brokerId=0, whichBrokerWhenConsumeSlowly=1, "
            "notifyConsumerIdsChangedEnable=true]"
        )
        assert disabled.startswith(f"create subscription group to {broker_a} success.\n")

        expected = SubscriptionGroupConfig(
            group,
            consume_from_min_enable=True,
            consume_broadcast_enable=False,
            retry_queue_nums=2,
            retry_max_times=1,
        )
        async with AdminClient(cluster.name_servers) as admin:
            for address in (broker_a, broker_b):
                assert (await admin.group_configs(address))[group] == expected
            assert (await admin.group_configs(broker_a))["mq-paused"] == SubscriptionGroupConfig(
                "mq-paused",
                consume_enable=False,
                consume_from_min_enable=False,
                consume_broadcast_enable=False,
            )
            assert "mq-paused" not in await admin.group_configs(broker_b)

        async with BrokerClient() as client:
            ok(await client.create_topic(broker_a, "mq-payments", 1))
            # The broker refuses pulls of a group whose consumeEnable is false.
            refused = await client.pull(broker_a, "mq-paused", "mq-payments", 0, 0)
            assert refused.code == ResponseCode.NO_PERMISSION, refused.remark

            # A send-back without maxReconsumeTimes (as older clients send it) is judged by
            # the group's retryMaxTimes, now 1: a first failure is retried, in a retry topic
            # of retryQueueNums (2) queues; a message consumed once before is a dead letter.
            offsets = []
            for reconsumed in (0, 1):
                sent = ok(
                    await client.send(
                        broker_a, "mq-payments", b"pay %d" % reconsumed, reconsume_times=reconsumed
                    )
                )
                offsets.append(parse_offset_msg_id(sent.ext_fields["msgId"])[1])
            for offset in offsets:
                ok(await client.send_back(broker_a, group, offset))

            configs = await client.topics(broker_a)
            retry = configs["topicConfigTable"][retry_topic(group)]
            assert (retry["readQueueNums"], retry["writeQueueNums"]) == (2, 2)

            async def dead_letters() -> list[bytes]:
                got = await client.pull(broker_a, group, dead_letter_topic(group), 0, 0)
                return [m.body for m in records(got)] if got.code == ResponseCode.SUCCESS else []

            async def retries() -> list[tuple[bytes, int]]:
                found = []
                for queue_id in (0, 1):
                    got = await client.pull(broker_a, group, retry_topic(group), queue_id, 0)
                    if got.code == ResponseCode.SUCCESS:
                        found += [(m.body, m.reconsume_times) for m in records(got)]
                return found

            assert await eventually(dead_letters, what="dead letter") == [b"pay 1"]
            assert await eventually(retries, what="retry delivered") == [(b"pay 0", 1)]

    asyncio.run(scenario())


@pytest.mark.slow
def test_consumer_progress_and_query_msg_by_id(mqadmin: Mqadmin, cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    topic, group = "mq-progress", "mq-progress-consumer"

    async def scenario() -> None:
        began = time.monotonic()
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, topic, 2)
            async with Producer(cluster.name_servers) as producer:
                first = await send_all(producer, (Message(topic, b"m%d" % i) for i in range(20)))
                collector = Collector()
                settings = ConsumerSettings(consume_from=ConsumeFrom.FIRST_OFFSET)
                consumer = PushConsumer(cluster.name_servers, group, settings=settings)
                consumer.subscribe(topic)
                consumer.register_listener(collector)
                async with consumer:

                    async def all_received() -> bool:
                        return len(collector.received) >= len(first)

                    await eventually(all_received, 20, what="first 20 consumed")

                async def committed() -> bool:  # on shutdown
                    progress = await admin.consumer_progress(group, topic)
                    return sum(p.lag for p in progress) == 0

                await eventually(committed, what="offsets committed at the queue ends")
                # 6 more messages: the group's lag.
                later = await send_all(producer, (Message(topic, b"n%d" % i) for i in range(5)))
                queried = Message(
                    topic, b"queried body", {"TAGS": "TagQ", "KEYS": "key-q", "color": "blue"}
                )
                later.append(await producer.send(queried))

            asked = time.monotonic()
            by_group, groups, shown = await outputs(
                mqadmin,
                ["consumerProgress", "-n", ns, "-g", group],
                ["consumerProgress", "-n", ns],
                ["queryMsgById", "-n", ns, "-i", later[-1].offset_msg_id],
            )

            # Every queue of the topics the group has offsets in, as our client reads them.
            rows = {(t, b, int(q)): r for t, b, q, *r in table(by_group, columns=7)}
            expected = {}
            for name in {t for t, _, _ in rows}:
                for p in await admin.consumer_progress(group, name):
                    consumed = max(p.consumer_offset, 0)
                    key = (name, p.queue.broker_name, p.queue.queue_id)
                    expected[key] = [str(p.max_offset), str(consumed), str(p.lag)]
            assert {k: r[:3] for k, r in rows.items()} == expected
            assert {t for t, _, _ in rows} <= {topic, retry_topic(group)}
            lag = Counter((r.queue.broker_name, r.queue.queue_id) for r in later)
            assert {(b, q): int(r[2]) for (t, b, q), r in rows.items() if t == topic} == {
                (b, q): lag[b, q] for b in ("broker-a", "broker-b") for q in (0, 1)
            }
            assert "Diff Total: 6" in by_group.splitlines()

            async with BrokerClient() as client:
                for (t, b, q), r in rows.items():
                    if r[1] == "0":
                        assert r[3] == "N/A"
                        continue
                    address = cluster.brokers[b].address
                    got = ok(await client.pull(address, group, t, q, int(r[1]) - 1, max_nums=1))
                    assert r[3] == utc(records(got)[0].store_timestamp_ms)

                # Offline: no clients, so no version, type or model; the lag of 6. TPS: the
                # 20 messages pulled per second of the brokers' age (they are younger than
                # the minute it is measured over), printed as an integer.
                [row] = [line.split() for line in groups.splitlines()[1:]]
                assert row[:3] == [group, "0", "OFFLINE"], row
                assert row[4] == "6", row
                assert 0 <= int(row[3]) <= len(first) / (asked - began)

                host, offset = parse_offset_msg_id(later[-1].offset_msg_id)
                stored = decode_record(ok(await client.view(str(host), offset)).body)
            assert stored.body == queried.body
            assert {k: stored.properties.get(k) for k in queried.properties} == queried.properties
            check_message(shown, stored, later[-1].offset_msg_id, group)

    asyncio.run(scenario())


@pytest.mark.slow
def test_cluster_list_broker_status_and_broker_config(mqadmin: Mqadmin, cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    addresses = {name: broker.address for name, broker in cluster.brokers.items()}

    async def scenario() -> None:
        async with AdminClient(cluster.name_servers) as admin:
            await create_topic(admin, "mq-status", 2)
        async with Producer(cluster.name_servers) as producer:
            sent = await send_all(producer, (Message("mq-status", b"s%d" % i) for i in range(10)))
        listing, status, config = await outputs(
            mqadmin,
            ["clusterList", "-n", ns],
            ["brokerStatus", "-n", ns, "-b", addresses["broker-a"]],
            ["getBrokerConfig", "-n", ns, "-c", "test"],
        )

        # Cluster, broker, id, address, version, in and out TPS (with the send and pull
        # queues, which reconsume does not have), page-cache lock wait, hours of messages kept,
        # share of the disk used.
        rows = [line.split() for line in listing.splitlines()[1:]]
        assert [row[:5] for row in rows] == [
            ["test", name, "0", addresses[name], "V4_9_8"] for name in ("broker-a", "broker-b")
        ]
        for row in rows:
            assert re.fullmatch(r"\d+\.\d\d\(0,0ms\)", row[5]), row
            assert row[6:8] == ["0.00(0,0ms)", "0"], row
            assert 0 <= float(row[8]) < 1, row
            assert 0 < float(row[9]) <= 1, row

        on_a = [r for r in sent if r.queue.broker_name == "broker-a"]
        async with BrokerClient() as client:
            first = decode_record(ok(await client.view(addresses["broker-a"], 0)).body)
            # Sends run concurrently: the last in the list need not be the last stored.
            offset = max(parse_offset_msg_id(r.offset_msg_id)[1] for r in on_a)
            last = decode_record(ok(await client.view(addresses["broker-a"], offset)).body)
        values = key_values(status.splitlines(), ":")
        exact = {
            "brokerVersionDesc": "V4_9_8",
            "brokerVersion": "409",
            "putMessageTimesTotal": str(len(on_a)),
            "commitLogMinOffset": "0",
            "commitLogMaxOffset": str(offset + last.store_size),
            "earliestMessageTimeStamp": str(first.store_timestamp_ms),
            "getTransferedTps": "0.00 0.00 0.00",
            "sendThreadPoolQueueSize": "0",
        }
        assert {k: values.get(k) for k in exact} == exact
        assert float(values["putTps"].split()[0]) > 0

        assert sorted(sections(config)) == sorted(addresses.values())
        configs = {name: key_values(sections(config)[a], "=") for name, a in addresses.items()}
        for name, values in configs.items():
            expected = {
                "brokerClusterName": "test",
                "brokerName": name,
                "brokerId": "0",
                "brokerIP1": "127.0.0.1",
                "listenPort": addresses[name].rpartition(":")[2],
                "namesrvAddr": ns,
                "storePathRootDir": str(cluster.stores[name]),
                "brokerRole": "ASYNC_MASTER",
                "flushDiskType": "SYNC_FLUSH",
                "messageDelayLevel": DELAY_LEVELS,
                "mappedFileSizeCommitLog": "67108864",
            }
            assert {k: values.get(k) for k in expected} == expected

    asyncio.run(scenario())
