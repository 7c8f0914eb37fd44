"""ali-ons (the npm RocketMQ client, unchanged) consuming through a failover: three reconsume
brokers of one name elect their master (``--election``, Sync replication); a background ali-ons
consumer receives what is sent, the master is killed with SIGKILL, and the consumer receives
what is sent afterwards through the new master, without a restart."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.client.producer import Producer
from reconsume.errors import ReconsumeError
from reconsume.message.model import Message
from reconsume.message.properties import TAGS

from ..integration.processes import ServerProcess, start_server
from ..integration.test_failover import lease, master_address, start
from ..polling import eventually
from .ali_ons_support import background_consumer
from .conftest import NodeProject

TOPIC = "ali-ons-failover"
GROUP = "ali_ons_failover"
TAG = "compat"


async def send(namesrv: ServerProcess, prefix: str, count: int) -> set[str]:
    """Send each body until acknowledged (a send may fail while a master is replaced)."""
    sent: set[str] = set()
    async with Producer([namesrv.address], send_timeout_s=2.0) as producer:
        for i in range(count):
            body = f"{prefix}-{i}"
            deadline = time.monotonic() + 20
            while True:
                try:
                    await producer.send(Message(TOPIC, body.encode(), {TAGS: TAG}))
                    break
                except ReconsumeError:
                    assert time.monotonic() < deadline, f"{body} not acknowledged"
                    await asyncio.sleep(0.05)
            sent.add(body)
    return sent


def test_ali_ons_consumes_on_through_a_failover(ali_ons: NodeProject, tmp_path: Path) -> None:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers = {i: start(namesrv, tmp_path, i) for i in range(3)}
    try:
        eventually(lambda: master_address(namesrv) == brokers[0].address, 20, "b0 master")
        eventually(
            lambda: len(lease(tmp_path).get("in_sync", [])) == 2, 20, "both replicas in sync"
        )

        async def create() -> None:
            async with AdminClient([namesrv.address]) as admin:
                await admin.create_topic(TOPIC, queues=4)

        asyncio.run(create())
        options = {"namesrv": namesrv.address, "topic": TOPIC, "group": GROUP, "tag": TAG}
        with background_consumer(ali_ons, instance="failover", **options) as consumer:

            def received() -> set[str]:
                return {r["body"] for r in consumer["received"]}

            before = asyncio.run(send(namesrv, "before", 100))
            consumer.wait_for(lambda: before <= received(), "the first 100", 30)
            brokers[0].kill()
            after = asyncio.run(send(namesrv, "after", 100))
            consumer.wait_for(lambda: after <= received(), "the 100 sent after the kill", 60)
            assert master_address(namesrv) in (brokers[1].address, brokers[2].address)
            consumer.close()
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()
