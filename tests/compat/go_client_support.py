"""Running the Go client driver (``go/``, Apache RocketMQ's rocketmq-client-go) against a
:mod:`tests.compat.servers` cluster, and reading its JSON-lines events (the same events as the
Java client driver's, read into the same :class:`~.driver_support.DriverRun`)."""

from __future__ import annotations

from pathlib import Path

from reconsume.message.names import retry_topic

from ..integration.wire_client import BrokerClient, eventually, ok
from .conftest import GoClient
from .driver_support import DRIVER_TIMEOUT_S, DriverRun, run_to_end, scenario_args
from .servers import Cluster

ROUTE_REFRESH_S = 30
"""How often the Go client asks the name server for the routes of the topics it uses: its
``_PullNameServerInterval``, a constant (``internal/client.go``), where the Java client has
``pollNameServerInterval``."""


def run_driver(
    go_client: GoClient,
    cluster: Cluster,
    scenario: str,
    state_dir: Path,
    timeout_s: float = DRIVER_TIMEOUT_S,
    **options: object,
) -> DriverRun:
    """Run one scenario to its end (``options`` become ``--name=value``, ``_`` as ``-``) and
    assert it finished: exit 0 after its "done" event. The driver is told where the brokers
    are: before shutting a consumer down it waits until they hold the offsets it committed
    (``go/offsets.go`` says why)."""
    brokers = ",".join(f"{name}={broker.address}" for name, broker in cluster.brokers.items())
    args = scenario_args(cluster.namesrv.address, timeout_s, {"brokers": brokers, **options})
    command = go_client.command(scenario, *args, state_dir=state_dir)
    return run_to_end(command, "Go", timeout_s, lambda: client_log(state_dir))


def client_log(state_dir: Path) -> str:
    """The client's own log: its warnings and errors."""
    path = state_dir / "rocketmq_client.log"
    return path.read_text(errors="replace") if path.is_file() else ""


async def create_retry_topic(cluster: Cluster, group: str, queues: int = 1) -> None:
    """``%RETRY%<group>`` with ``queues`` queues on each broker (a new group's
    ``retryQueueNums``), visible in the name server's route.

    The brokers create it themselves at the group's first heartbeat, as RocketMQ's do; but the
    Go client asks for its route before that heartbeat, and then only every
    :data:`ROUTE_REFRESH_S`, rebalancing every 20 s: it would pull a retry topic created that
    way some 40 s after it started. Created beforehand (as ``mqadmin updateTopic`` would), its
    first rebalance takes it."""
    topic = retry_topic(group)
    async with BrokerClient() as admin:
        for broker in cluster.brokers.values():
            ok(await admin.create_topic(broker.address, topic, queues))

        async def routed() -> bool:
            route = await admin.route(cluster.namesrv.address, topic) or {}
            found = {q["brokerName"]: q["readQueueNums"] for q in route.get("queueDatas", [])}
            return found == dict.fromkeys(cluster.brokers, queues)

        await eventually(routed, what=f"route of {topic} on every broker")
