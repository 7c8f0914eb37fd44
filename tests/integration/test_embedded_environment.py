"""Embedded mode's reconciler (reconsume.embedded.environment) with real name-server and broker
processes: manifests become running processes and broker configuration (a ConsumerGroup's
consume type too); an edit is applied; an invalid edit changes nothing and is reported with
file, object and field; a removed manifest is deleted under its deletion policy; a broker that
dies is restarted; stop ends every process; with replicas a killed master is replaced by its
replica, losing nothing."""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.embedded.brokers import LEASE_DURATION_MS, lease_path, read_lease
from reconsume.embedded.environment import Environment, ManifestsInvalid
from reconsume.errors import ReconsumeError
from reconsume.message.decode import decode_record
from reconsume.message.model import Message
from reconsume.store import MessageStore

from .. import polling
from .wire_client import eventually

T = TypeVar("T")

CLUSTER = """
apiVersion: reconsume.io/v1alpha1
kind: BrokerCluster
metadata:
  name: shop
spec:
  brokers: 2
  delayLevels: "1s 2s 3s"
"""
TOPIC = """
apiVersion: reconsume.io/v1alpha1
kind: Topic
metadata:
  name: orders
spec:
  cluster: shop
  queues: 3
"""
GROUP = """
apiVersion: reconsume.io/v1alpha1
kind: ConsumerGroup
metadata:
  name: payments
spec:
  cluster: shop
  groupName: GID_payments
  consumeType: {consume_type}
  retry:
    maxTimes: {max_times}
  deletionPolicy: Delete
"""


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(textwrap.dedent(text))


def run(coroutine: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coroutine())


async def group_max_times(environment: Environment, group: str) -> set[int]:
    """retryMaxTimes of ``group`` on every broker of the cluster (absent: -999)."""
    return {times for times, _kind in await group_settings(environment, group)}


async def group_settings(environment: Environment, group: str) -> set[tuple[int, str]]:
    """(retryMaxTimes, consume type) of ``group`` on every broker (absent: (-999, ""))."""
    (cluster,) = environment.clusters.values()
    assert cluster.name_server is not None
    async with AdminClient([cluster.name_server]) as admin:
        values: set[tuple[int, str]] = set()
        for broker in await admin.brokers("shop"):
            assert broker.master is not None
            configs = await admin.group_configs(broker.master)
            config = configs.get(group)
            values.add(
                (-999, "") if config is None else (config.retry_max_times, config.consume_type)
            )
        return values


@pytest.mark.slow
def test_manifests_are_applied_edited_refused_and_removed(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "cluster.yaml", CLUSTER)
    write(manifests, "topic.yaml", TOPIC)
    write(manifests, "group.yaml", GROUP.format(max_times=4, consume_type="Pop"))
    environment = Environment(tmp_path / "data", [manifests], namesrv_port=0)

    async def scenario() -> None:
        await environment.start()
        try:
            (cluster,) = environment.clusters.values()
            assert sorted(cluster.brokers) == ["shop-broker-0", "shop-broker-1"]
            assert all(child.running for child in cluster.brokers.values())
            await until_ready(environment)
            assert await group_settings(environment, "GID_payments") == {(4, "POP")}
            group = environment.objects[("ConsumerGroup", "default", "payments")]
            assert (group.status["retryDepth"], group.status["deadLetterDepth"]) == (0, 0)
            topic = environment.objects[("Topic", "default", "orders")]
            assert [b["readQueueNums"] for b in topic.status["brokers"]] == [3, 3]

            # An edit reaches every broker.
            write(manifests, "group.yaml", GROUP.format(max_times=6, consume_type="Pull"))
            await environment.sync()
            assert await group_settings(environment, "GID_payments") == {(6, "PULL")}

            # An invalid edit changes nothing and says where the problem is.
            write(manifests, "group.yaml", GROUP.format(max_times=-5, consume_type="Pull"))
            await environment.sync()
            (problem,) = environment.problems
            assert problem.startswith(f"{manifests / 'group.yaml'}: ConsumerGroup payments: ")
            assert "spec.retry.maxTimes" in problem
            assert await group_max_times(environment, "GID_payments") == {6}
            assert ("ConsumerGroup", "default", "payments") in environment.applied

            # A broker that dies is started again on its store.
            killed = cluster.brokers["shop-broker-1"]
            assert killed.pid is not None
            os.kill(killed.pid, signal.SIGKILL)
            await killed.wait()
            await environment.supervise()
            assert cluster.brokers["shop-broker-1"].running
            assert cluster.brokers["shop-broker-1"].restarts == 1

            # Removing the manifest deletes the group (deletionPolicy Delete, no dead letters).
            (manifests / "group.yaml").unlink()

            async def deleted() -> bool:
                await environment.sync()
                return await group_max_times(environment, "GID_payments") == {-999}

            await eventually(deleted, 30.0, "the group deleted from the brokers")
            assert ("ConsumerGroup", "default", "payments") not in environment.objects
        finally:
            await environment.stop()
        assert not any(child.running for child in cluster.brokers.values())

    run(scenario)
    state = (tmp_path / "data" / "state.json").read_text()
    assert '"running": false' in state


async def until_ready(environment: Environment) -> None:
    async def ready() -> bool:
        await environment.sync()
        return bool(environment.objects) and all(s.ready for s in environment.objects.values())

    await eventually(ready, 30.0, "every object ready")


def test_invalid_manifests_start_nothing(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "cluster.yaml", CLUSTER)
    write(manifests, "group.yaml", GROUP.format(max_times="many", consume_type="Any"))
    environment = Environment(tmp_path / "data", [manifests], namesrv_port=0)
    with pytest.raises(ManifestsInvalid) as raised:
        run(environment.start)
    problem = str(raised.value.problems[0])
    assert problem == (
        f"{manifests / 'group.yaml'}: ConsumerGroup payments: spec.retry.maxTimes: "
        'Invalid value: "string": must be of type integer'
    )
    assert environment.clusters == {}


@pytest.mark.slow
def test_children_end_when_reconsume_up_is_killed(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "cluster.yaml", CLUSTER)
    data = tmp_path / "data"
    up = subprocess.Popen(
        [sys.executable, "-m", "reconsume", "up", "-f", str(manifests), "--data-dir", str(data),
         "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def started() -> list[str]:
            path = data / "state.json"
            if not path.exists():
                return []
            (cluster,) = json.loads(path.read_text())["clusters"]
            return [cluster["nameServer"], *(b["address"] for b in cluster["brokers"])]

        servers = polling.eventually(lambda: len(started()) == 3 and started(), 60.0, "started")
    finally:
        up.kill()
        up.wait()

    def refused(address: str) -> bool:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except ConnectionRefusedError:
            return True
        except ConnectionResetError:
            return False  # a server closing its socket as we connected: ask again
        return False

    for address in servers:
        polling.eventually(lambda a=address: refused(a), 30.0, f"{address} closed")
    # A port closes as a broker begins to stop; its store lock goes when the process is gone.
    locks = sorted(data.glob("*/*/*/store/lock"))
    assert len(locks) == 2, locks
    for lock in locks:
        polling.eventually(lambda path=lock: unlocked(path), 30.0, f"{lock} released")


def unlocked(path: Path) -> bool:
    """Whether the store lock at ``path`` can be taken (its broker process has exited)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@pytest.mark.slow
def test_a_killed_master_is_replaced_by_its_replica_and_restarts_as_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reconsume.embedded.environment")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "cluster.yaml", CLUSTER.replace("brokers: 2", "brokers: 1\n  replicas: 2"))
    write(manifests, "topic.yaml", TOPIC)
    data = tmp_path / "data"
    environment = Environment(data, [manifests], namesrv_port=0)
    first, replica = "shop-broker-0", "shop-broker-r1-0"

    async def scenario() -> tuple[list[str], float]:
        await environment.start()
        try:
            (cluster,) = environment.clusters.values()
            assert sorted(cluster.brokers) == [first, replica]
            assert cluster.masters() == {first}
            await until_ready(environment)
            assert cluster.name_server is not None
            name_server = cluster.name_server

            async def routed_master() -> str | None:
                async with AdminClient([name_server]) as admin:
                    return next((b.master for b in await admin.brokers("shop")), None)

            assert await routed_master() == cluster.brokers[first].address
            async with Producer([name_server], send_timeout_s=2.0) as producer:

                async def send(body: str, deadline_s: float = 10.0) -> str:
                    """Send until acknowledged; its id."""
                    end = asyncio.get_running_loop().time() + deadline_s
                    while True:
                        try:
                            return (await producer.send(Message("orders", body.encode()))).msg_id
                        except ReconsumeError:
                            assert asyncio.get_running_loop().time() < end, f"{body} not sent"
                            await asyncio.sleep(0.05)

                acked = [await send(f"before-{i}") for i in range(100)]

                async def supervising() -> None:  # as reconsume up does, every 2 s
                    while True:
                        await asyncio.sleep(2.0)
                        await environment.supervise()

                supervisor = asyncio.create_task(supervising())
                try:
                    killed = cluster.brokers[first]
                    assert killed.pid is not None
                    killed_at = asyncio.get_running_loop().time()
                    os.kill(killed.pid, signal.SIGKILL)
                    # Under Sync replication the new master answers sends once a replica is
                    # in sync again: the old master, restarted by supervision, following it.
                    acked.append(await send("during", 30.0))
                    failover_s = asyncio.get_running_loop().time() - killed_at
                finally:
                    supervisor.cancel()
                assert await routed_master() == cluster.brokers[replica].address
                assert cluster.masters() == {replica}
                assert cluster.brokers[first].running
                assert cluster.brokers[first].restarts == 1
                lease = read_lease(lease_path(cluster.root, "shop-broker-0"))
                assert lease is not None
                # The lease names processes as <broker name>-<index>.
                assert (lease.holder, lease.in_sync, lease.epoch) == (
                    "shop-broker-0-1", ("shop-broker-0-0",), 2,
                )  # fmt: skip
                acked += [await send(f"after-{i}") for i in range(100)]
            environment.write_state()
            (shown,) = json.loads((data / "state.json").read_text())["clusters"]
            assert [(b["name"], b["master"]) for b in shown["brokers"]] == [
                (first, False), (replica, True),
            ]  # fmt: skip
            return acked, failover_s
        finally:
            await environment.stop()

    acked, failover_s = run(scenario)
    # What `reconsume up` prints: one exit, then the restart that rejoins as a replica.
    assert [r.getMessage() for r in caplog.records if r.name.endswith("environment")] == [
        f"broker {first}, master of shop-broker-0, exited (-9); a replica takes over, then it "
        "restarts",
        f"broker {first} restarting, to rejoin as a replica",
    ]
    # The replica takes the lease within 1.2 durations; supervision then restarts the old
    # master within its 2 s interval, which catches up at once (sends resumed after 4.3 s).
    bound_s = 1.2 * LEASE_DURATION_MS / 1000 + 2.0 + 5.0
    assert failover_s < bound_s, f"sends failed for {failover_s:.1f} s after the kill"
    # Every acknowledged message is in both stores (the replica's log is the master's).
    for process in (first, replica):
        with MessageStore(data / "default" / "shop" / process / "store", background=False) as store:
            ids = set()
            for queue in store.queues.of_topic("orders"):
                for phys, size, _tag in queue.entries(queue.min_offset, 1 << 20):
                    record = store.commitlog.read(phys, size)
                    assert record is not None
                    ids.add(decode_record(record).uniq_key)
            assert set(acked) <= ids, f"{process} lacks {len(set(acked) - ids)} messages"
