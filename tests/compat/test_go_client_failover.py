"""Apache RocketMQ's Go client (rocketmq-client-go/v2, unchanged) through a failover: three
reconsume brokers of one name elect their master (``--election``, Sync replication); while the
driver's producer sends one message at a time and its push consumer receives them, the master
is killed with SIGKILL. The client goes on without a restart: every message it had acknowledged
is received (by message id), and it sends to, and consumes from, the master that replaced the
killed one.

Unlike the Java client (whose driver asks the name server for routes every second), the Go
client keeps a broker's address from the route it fetched until its next fetch, every
:data:`~.go_client_support.ROUTE_REFRESH_S` (a constant of the client): until then its sends
fail (connection refused by the killed master's address) and its pulls are retried every 3 s,
at the same address; from then on it uses the new master's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from reconsume.client.admin import AdminClient
from reconsume.message.ids import parse_offset_msg_id

from ..integration.processes import ServerProcess, start_server
from ..integration.test_failover import master_address, start_elected
from ..polling import eventually
from .conftest import GoClient
from .driver_support import BackgroundDriver
from .go_client_support import ROUTE_REFRESH_S, client_log

TOPIC = "go-failover"
GROUP = "go_failover"
COUNT = 200
KILL_AFTER = 60
DRIVER_TIMEOUT_S = 110
"""The kill, up to two route refreshes of the client (one may come while the name has no
master yet), and the sends after them, with room to spare."""


def host_of(offset_msg_id: str) -> str:
    return str(parse_offset_msg_id(offset_msg_id)[0])


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(DRIVER_TIMEOUT_S + 60)
def test_the_go_client_goes_on_through_a_failover(go_client: GoClient, tmp_path: Path) -> None:
    namesrv = start_server("namesrv", "--listen", "127.0.0.1:0")
    brokers: dict[int, ServerProcess] = {}
    state_dir = tmp_path / "go"
    try:
        brokers = start_elected(namesrv, tmp_path)

        async def create() -> None:
            async with AdminClient([namesrv.address]) as admin:
                await admin.create_topic(TOPIC, queues=4)

        asyncio.run(create())
        command = go_client.command(
            "failover",
            f"--namesrv={namesrv.address}",
            f"--topic={TOPIC}",
            f"--group={GROUP}",
            f"--count={COUNT}",
            f"--timeout-ms={(DRIVER_TIMEOUT_S - 10) * 1000}",
            state_dir=state_dir,
        )
        with BackgroundDriver(command) as driver:
            of = driver.of
            eventually(lambda: len(of("sent")) >= KILL_AFTER, 40, f"{KILL_AFTER} sends")
            old_master = brokers[0].address
            killed_at = time.time() * 1000
            brokers[0].kill()
            driver.finish(DRIVER_TIMEOUT_S)

        # No acknowledged send is lost: every acknowledged message id is received.
        sent, received = of("sent"), of("received")
        assert sorted(e["index"] for e in sent) == list(range(COUNT))
        assert {e["msgId"] for e in sent} <= {e["msgId"] for e in received}

        # Each send begun after the kill that was acknowledged went to the new master: the
        # client's retries stay on the broker name, whose master address it takes from its
        # route. Until it fetches the route again the sends to the old address fail.
        new_master = master_address(namesrv)
        assert new_master in (brokers[1].address, brokers[2].address)
        after = [e for e in sent if e["sentAt"] > killed_at]
        assert len(after) >= COUNT - KILL_AFTER - 5, "sends after the kill"
        assert {host_of(e["offsetMsgId"]) for e in after} == {new_master}
        failed = [e for e in of("sendFailed") if e["at"] > killed_at]
        assert failed, "no send failed after the kill"
        assert any(old_master in e["error"] for e in failed), failed[:3]
        recovered_s = (after[0]["ackedAt"] - killed_at) / 1000
        assert recovered_s < 2 * ROUTE_REFRESH_S + 5, recovered_s

        # The consumer pulled at the killed master's address until its own route fetch (it
        # logs each failed pull), then goes on with what only the new master and its replica
        # hold: the messages stored after the kill.
        log = client_log(state_dir)
        assert f'msg="pull message from broker error" broker="{old_master}"' in log
        later = {e["msgId"] for e in after}
        from_new = [e for e in received if e["msgId"] in later]
        assert {host_of(e["offsetMsgId"]) for e in from_new} == {new_master}
        assert "panic" not in log
    finally:
        for process in brokers.values():
            process.stop()
        namesrv.stop()
