"""ali-ons (the npm RocketMQ client, unchanged) consuming through a failover: three reconsume
brokers of one name elect their master (``--election``, Sync replication); a background ali-ons
consumer receives what is sent, the master is killed with SIGKILL, and the consumer receives
what is sent afterwards through the new master, without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reconsume.client.admin import AdminClient

from ..integration.processes import ServerProcess, start_server
from ..integration.test_failover import master_address, send_all, start_elected
from .ali_ons_support import background_consumer
from .conftest import NodeProject

TOPIC = "orders"  # the topic send_all sends to
GROUP = "ali_ons_failover"
TAG = "compat"


def test_ali_ons_consumes_on_through_a_failover(ali_ons: NodeProject, tmp_path: Path) -> None:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers: dict[int, ServerProcess] = {}
    try:
        brokers = start_elected(namesrv, tmp_path)

        async def create() -> None:
            async with AdminClient([namesrv.address]) as admin:
                await admin.create_topic(TOPIC, queues=4)

        asyncio.run(create())
        options = {"namesrv": namesrv.address, "topic": TOPIC, "group": GROUP, "tag": TAG}
        with background_consumer(ali_ons, instance="failover", **options) as consumer:

            def received() -> set[str]:
                return {r["body"] for r in consumer["received"]}

            before = {f"before-{i}" for i in range(100)}
            asyncio.run(send_all(namesrv, sorted(before), 20, tags=TAG))
            consumer.wait_for(lambda: before <= received(), "the first 100", 30)
            brokers[0].kill()
            after = {f"after-{i}" for i in range(100)}
            asyncio.run(send_all(namesrv, sorted(after), 20, tags=TAG))
            consumer.wait_for(lambda: after <= received(), "the 100 sent after the kill", 60)
            assert master_address(namesrv) in (brokers[1].address, brokers[2].address)
            consumer.close()
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()
