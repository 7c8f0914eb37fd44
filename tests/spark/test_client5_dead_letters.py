"""Dead letters a RocketMQ 5.x consumer made — Apache RocketMQ's Python client, over a broker's
gRPC service — are a dead-letter job's like any others: ``reconsume dlq reprocess`` on local
Spark sends them back to their topic, and the 5.x consumer of the same group receives them
there, each naming its dead letter's message id."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconsume.message.names import dead_letter_topic
from reconsume.spark.jobs.main import main

from ..compat.client5_support import run_client5
from ..integration.cluster import Cluster, start_cluster
from ..integration.retry_support import TEST_DELAY_LEVELS
from ..integration.wire_client import BrokerClient, ok
from ..polling import eventually, eventually_async
from ..scratch import module_dir
from .dead_letters import dead_letter_backlog

TOPIC = "v5-dlj"
GROUP = "v5_dlj"


@pytest.fixture(scope="module")
def grpc_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """A name server and two brokers serving gRPC; the first broker's gRPC address."""
    with module_dir(tmp_path_factory, "client5-dlj") as root:
        started = start_cluster(
            root, extra=("--grpc-listen", "127.0.0.1:0", "--delay-levels", TEST_DELAY_LEVELS)
        )
        try:
            output = "".join(next(iter(started.brokers.values())).output)
            match = re.search(r"serving gRPC on (\S+)", output)
            assert match is not None, output
            yield started, match.group(1)
        finally:
            started.kill()


async def _setup(cluster: Cluster) -> None:
    async with BrokerClient() as admin:
        for broker in cluster.brokers.values():
            ok(await admin.create_topic(broker.address, TOPIC, 2))
            ok(await admin.create_group(broker.address, {"groupName": GROUP, "retryMaxTimes": 1}))

        async def routed() -> bool:
            route = await admin.route(cluster.namesrv.address, TOPIC) or {}
            return len(route.get("queueDatas") or []) == len(cluster.brokers)

        await eventually_async(routed, what=f"route of {TOPIC}")


def test_a_5x_consumers_dead_letters_are_reprocessed_back_to_it(
    spark: Any, grpc_cluster: tuple[Cluster, str], capsys: Any, tmp_path: Path
) -> None:
    cluster, endpoint = grpc_cluster
    asyncio.run(_setup(cluster))
    sent = run_client5("python", "send", endpoint, tmp_path / "send", topic=TOPIC, count=3,
                       prefix="dlj")["sent"]  # fmt: skip
    ids = {str(s["messageId"]) for s in sent}
    # Fails every delivery: after its 2 attempts each message is a dead letter.
    run_client5("python", "push-consume", endpoint, tmp_path / "fail", 25.0, check=False,
                topic=TOPIC, group=GROUP, count=3, prefix="dlj", fail_times=99)  # fmt: skip
    eventually(lambda: dead_letter_backlog(cluster, GROUP) == 3, 30.0,
               what=f"3 dead letters in {dead_letter_topic(GROUP)}")  # fmt: skip

    code = main(["reprocess", "--group", GROUP, "--name-server", cluster.namesrv.address],
                spark=spark)  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, result
    assert result["counts"]["resent"] == 3, result
    assert dead_letter_backlog(cluster, GROUP) == 0

    run = run_client5("python", "push-consume", endpoint, tmp_path / "again", topic=TOPIC,
                      group=GROUP, count=3, prefix="dlj")  # fmt: skip
    received = run["received"]
    # Each re-send has an id of its own (the job's, the same on a re-run); the dead letter's
    # is its ORIGIN_MESSAGE_ID.
    assert {e["properties"]["ORIGIN_MESSAGE_ID"] for e in received} == ids  # type: ignore[index]
    assert not ids & {str(e["messageId"]) for e in received}
    assert {e["properties"]["RECONSUME_REPROCESSED"] for e in received} == {  # type: ignore[index]
        result["job"]
    }
    assert {e["deliveryAttempt"] for e in received} == {1}  # a new life in its topic
