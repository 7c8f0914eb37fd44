"""Embedded mode's reconciler (reconsume.embedded.environment) with real name-server and broker
processes: manifests become running processes and broker configuration; an edit is applied;
an invalid edit changes nothing and is reported with file, object and field; a removed
manifest is deleted under its deletion policy; a broker that dies is restarted; stop ends
every process."""

from __future__ import annotations

import asyncio
import fcntl
import json
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
from reconsume.embedded.environment import Environment, ManifestsInvalid

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
    (cluster,) = environment.clusters.values()
    assert cluster.name_server is not None
    async with AdminClient([cluster.name_server]) as admin:
        values = set()
        for broker in await admin.brokers("shop"):
            assert broker.master is not None
            configs = await admin.group_configs(broker.master)
            config = configs.get(group)
            values.add(-999 if config is None else config.retry_max_times)
        return values


@pytest.mark.slow
def test_manifests_are_applied_edited_refused_and_removed(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "cluster.yaml", CLUSTER)
    write(manifests, "topic.yaml", TOPIC)
    write(manifests, "group.yaml", GROUP.format(max_times=4))
    environment = Environment(tmp_path / "data", [manifests], namesrv_port=0)

    async def scenario() -> None:
        await environment.start()
        try:
            (cluster,) = environment.clusters.values()
            assert sorted(cluster.brokers) == ["shop-broker-0", "shop-broker-1"]
            assert all(child.running for child in cluster.brokers.values())
            await until_ready(environment)
            assert await group_max_times(environment, "GID_payments") == {4}
            group = environment.objects[("ConsumerGroup", "default", "payments")]
            assert (group.status["retryDepth"], group.status["deadLetterDepth"]) == (0, 0)
            topic = environment.objects[("Topic", "default", "orders")]
            assert [b["readQueueNums"] for b in topic.status["brokers"]] == [3, 3]

            # An edit reaches every broker.
            write(manifests, "group.yaml", GROUP.format(max_times=6))
            await environment.sync()
            assert await group_max_times(environment, "GID_payments") == {6}

            # An invalid edit changes nothing and says where the problem is.
            write(manifests, "group.yaml", GROUP.format(max_times=-5))
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
    write(manifests, "group.yaml", GROUP.format(max_times="many"))
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
