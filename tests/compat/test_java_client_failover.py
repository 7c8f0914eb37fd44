"""Apache RocketMQ's Java client (rocketmq-client 4.9.8, unchanged) through a failover: three
reconsume brokers of one name elect their master (``--election``, Sync replication); while the
driver's producer sends one message at a time and its push consumer receives them, the master
is killed with SIGKILL. The client goes on without a restart: every message it had acknowledged
is received, and it keeps sending to the master that replaced the killed one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reconsume.client.admin import AdminClient
from reconsume.message.ids import parse_offset_msg_id

from ..integration.processes import ServerProcess, start_server
from ..integration.test_failover import master_address, start_elected
from ..polling import eventually
from .conftest import JavaClient
from .driver_support import BackgroundDriver

TOPIC = "java-failover"
GROUP = "java_failover"
COUNT = 300
KILL_AFTER = 100


def test_the_java_client_goes_on_through_a_failover(
    java_client: JavaClient, tmp_path: Path
) -> None:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers: dict[int, ServerProcess] = {}
    try:
        brokers = start_elected(namesrv, tmp_path)

        async def create() -> None:
            async with AdminClient([namesrv.address]) as admin:
                await admin.create_topic(TOPIC, queues=4)

        asyncio.run(create())
        command = java_client.command(
            "failover",
            f"--namesrv={namesrv.address}",
            f"--topic={TOPIC}",
            f"--group={GROUP}",
            f"--count={COUNT}",
            "--queues=4",
            "--timeout-ms=80000",
            state_dir=tmp_path / "java",
        )
        with BackgroundDriver(command) as driver:
            eventually(lambda: len(driver.of("sent")) >= KILL_AFTER, 40, f"{KILL_AFTER} sends")
            brokers[0].kill()
            driver.finish(90)
        sent = driver.of("sent")
        acknowledged = {e["body"] for e in sent}
        received = {e["body"] for e in driver.of("received")}
        assert len(acknowledged) == COUNT
        assert acknowledged <= received
        new_master = master_address(namesrv)
        assert new_master in (brokers[1].address, brokers[2].address)
        after_kill = sent[KILL_AFTER + 5 :]
        assert after_kill, "nothing sent after the kill"
        hosts = {str(parse_offset_msg_id(e["offsetMsgId"])[0]) for e in after_kill[-10:]}
        assert hosts == {new_master}
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()
