"""reconsume servers for compat tests: one name server and two Sync-flush brokers on 127.0.0.1
(64 MiB commit-log segments, the retry tests' delay levels in tenths of a second), stopped
cleanly afterwards; and what the tests read back from them with our own wire client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconsume.message.decode import decode_record
from reconsume.message.ids import parse_offset_msg_id
from reconsume.message.model import StoredMessage
from reconsume.wire.codes import RequestCode, ResponseCode

from ..integration.cluster import start_broker
from ..integration.processes import ServerProcess, start_server
from ..integration.retry_support import TEST_DELAY_LEVELS, read_queue
from ..integration.wire_client import BrokerClient, eventually, ok

BROKERS = ("broker-a", "broker-b")
QUEUES_PER_BROKER = 4
CLUSTER_NAME = "compat"

Queue = tuple[str, int]
"""(broker name, queue id)"""


@dataclass
class Cluster:
    namesrv: ServerProcess
    brokers: dict[str, ServerProcess] = field(default_factory=dict)

    def broker_of(self, address: str) -> str:
        """The name of the broker listening on ``address`` (a message's store host)."""
        names = [name for name, broker in self.brokers.items() if broker.address == address]
        assert len(names) == 1, (address, {n: b.address for n, b in self.brokers.items()})
        return names[0]

    def broker_of_msg_id(self, offset_msg_id: str) -> str:
        """The name of the broker an offset message id says stored the message."""
        host, _ = parse_offset_msg_id(offset_msg_id)
        return self.broker_of(str(host))


@contextmanager
def compat_cluster(
    root: Path, cluster_name: str = CLUSTER_NAME, *, ipv6: bool = False
) -> Iterator[Cluster]:
    """A name server and :data:`BROKERS` (cluster ``cluster_name``: Sync flush, 64 MiB commit-log
    segments, the retry tests' short delay levels), each asserted to exit 0 on SIGTERM at the
    end. With ``ipv6`` every server listens on every interface (``:0``, as in pods), the
    brokers advertise ``::1`` and the name server's address given to clients is ``[::1]``'s."""
    root.mkdir(parents=True, exist_ok=True)
    namesrv = start_server("namesrv", "--listen", ":0" if ipv6 else "127.0.0.1:0")
    if ipv6:
        namesrv.address = f"[::1]{namesrv.address}"  # it says "listening on :PORT"
    listen, advertise = (":0", ("--advertise", "[::1]:0")) if ipv6 else ("127.0.0.1:0", ())
    cluster = Cluster(namesrv)
    try:
        for name in BROKERS:
            cluster.brokers[name] = start_broker(
                namesrv.address,
                name,
                root / name,
                listen=listen,
                cluster=cluster_name,
                extra=("--delay-levels", TEST_DELAY_LEVELS, *advertise),
            )
        yield cluster
    finally:
        stop_cleanly(cluster.brokers, namesrv)


FAMILIES = ("IPv4", "IPv6")
"""How clients reach a :func:`family_cluster`."""


@contextmanager
def family_cluster(root: Path, family: str, topic: str) -> Iterator[Cluster]:
    """:func:`compat_cluster` reached over ``family`` (``IPv6``: its servers on every
    interface, the brokers advertising ``::1``), with ``topic`` created on both brokers."""
    with compat_cluster(root, ipv6=family == "IPv6") as started:
        asyncio.run(create_topic(started, topic))
        yield started


def stop_cleanly(brokers: Mapping[str, ServerProcess], namesrv: ServerProcess) -> None:
    """Stop the brokers, then the name server; each must have exited cleanly (its output
    otherwise)."""
    codes = {name: broker.stop() for name, broker in brokers.items()}
    namesrv_code = namesrv.stop()
    for name, code in codes.items():
        assert code == 0, "".join(brokers[name].output)
    assert namesrv_code == 0, "".join(namesrv.output)


def all_queues() -> set[Queue]:
    return {(name, queue_id) for name in BROKERS for queue_id in range(QUEUES_PER_BROKER)}


async def create_topic(cluster: Cluster, topic: str) -> None:
    """``topic`` with 4 queues on each broker, visible in the name server's route."""
    async with BrokerClient() as admin:
        for broker in cluster.brokers.values():
            ok(await admin.create_topic(broker.address, topic, QUEUES_PER_BROKER))

        async def routed() -> bool:
            route = await admin.route(cluster.namesrv.address, topic) or {}
            queues = {q["brokerName"]: q["writeQueueNums"] for q in route.get("queueDatas", [])}
            return queues == dict.fromkeys(BROKERS, QUEUES_PER_BROKER)

        await eventually(routed, what=f"route of {topic} on both brokers")


async def topic_route(cluster: Cluster, topic: str) -> dict[str, Any]:
    """The name server's route of ``topic`` (GET_ROUTEINFO_BY_TOPIC)."""
    async with BrokerClient() as client:
        route = await client.route(cluster.namesrv.address, topic)
    assert route is not None, f"no route of {topic}"
    return route


async def group_offsets(
    cluster: Cluster, group: str, topic: str, queues_per_broker: int = QUEUES_PER_BROKER
) -> dict[Queue, tuple[int, int]]:
    """(broker, queue) → (the group's committed offset or -1, the queue's max offset)."""
    found = {}
    async with BrokerClient() as client:
        for name, broker in cluster.brokers.items():
            for queue_id in range(queues_per_broker):
                response = await client.query_offset(broker.address, group, topic, queue_id)
                committed = -1
                if response.code == ResponseCode.SUCCESS:
                    committed = int(response.ext_fields["offset"])
                max_offset = await client.queue_offset(
                    broker.address, RequestCode.GET_MAX_OFFSET, topic, queue_id
                )
                found[name, queue_id] = (committed, max_offset)
    return found


def committed_at_queue_ends(
    cluster: Cluster, group: str, topic: str, queues_per_broker: int = QUEUES_PER_BROKER
) -> dict[Queue, int]:
    """Each queue's max offset, once the group's committed offset is at every queue's end (a
    client commits with one-way requests, so they may land just after it exits)."""

    last: dict[Queue, tuple[int, int]] = {}

    async def all_committed() -> dict[Queue, int] | None:
        last.update(await group_offsets(cluster, group, topic, queues_per_broker))
        if all(committed == end for committed, end in last.values()):
            return {queue: end for queue, (_, end) in last.items()}
        return None

    def behind() -> str:
        return "(committed, end) of the queues behind: " + ", ".join(
            f"{broker}/{queue_id}: {offsets}"
            for (broker, queue_id), offsets in sorted(last.items())
            if offsets[0] != offsets[1]
        )

    result: dict[Queue, int] = asyncio.run(
        eventually(
            all_committed, what=f"{group}'s offsets of {topic} at the queue ends", detail=behind
        )
    )
    return result


async def read_all(
    cluster: Cluster, topic: str, queue_id: int = 0
) -> dict[str, list[StoredMessage]]:
    """Every message of (topic, queue) on each broker, by broker name."""
    async with BrokerClient() as client:
        return {
            name: await read_queue(client, broker.address, topic, queue_id)
            for name, broker in cluster.brokers.items()
        }


def read_queues(cluster: Cluster, topic: str, queue_id: int = 0) -> dict[str, list[StoredMessage]]:
    """:func:`read_all`, from synchronous code."""
    return asyncio.run(read_all(cluster, topic, queue_id))


def view_records(cluster: Cluster, wanted: list[tuple[str, int]]) -> list[StoredMessage]:
    """The records at these (broker name, commit-log offset) positions (VIEW_MESSAGE_BY_ID)."""

    async def view() -> list[StoredMessage]:
        async with BrokerClient() as client:
            return [
                decode_record(ok(await client.view(cluster.brokers[name].address, offset)).body)
                for name, offset in wanted
            ]

    return asyncio.run(view())
