"""Retries and dead letters on the node: Apache RocketMQ's Java client (4.9.8, unchanged) from
the machine through the name server's Service fails messages into ``%DLQ%<group>``; the
ConsumerGroup's status and the brokers' /metrics agree; a Drain and a Reprocess DeadLetterJob
run as Job pods from the image built from broker_image/Dockerfile (target dlq-jobs), Spark
local in the pod, and report the counts their pods' termination messages hold."""

from __future__ import annotations

from typing import Any

import pytest

from reconsume.message.names import dead_letter_topic

from .node import Node
from .support import DEMO_NAMESPACE, broker_http_addresses, get, metric_sum, wait_for
from .workloads import (
    CLUSTER,
    MAX_RECONSUME,
    MESSAGES,
    RetryGroup,
    dlq_depth_everywhere,
    run_job,
    termination_message,
    topic_total,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_failing_java_consumer_fills_the_dead_letter_queue(
    examples: Node, dead_letters: RetryGroup
) -> None:
    node = examples
    expected = dead_letters.dead_letters
    # The ConsumerGroup's status (the operator reads the brokers every DRIFT_SECONDS) and
    # the brokers' own /metrics agree on the dead letters the client made.
    wait_for(
        lambda: dlq_depth_everywhere(node, dead_letters) == (expected, expected),
        60,
        f"{expected} dead letters in status and /metrics "
        f"(now {dlq_depth_everywhere(node, dead_letters)})",
        node,
    )
    addresses = broker_http_addresses(node, DEMO_NAMESPACE, CLUSTER)
    group = dead_letters.group
    # Even-numbered messages failed 3 times (the last one dead-letters them), odd ones once.
    sends_back = metric_sum(addresses, "reconsume_send_back_total", group=group)
    assert sends_back == expected * (MAX_RECONSUME + 1) + (MESSAGES - expected)
    assert metric_sum(addresses, "reconsume_dead_letters_total", group=group) == expected

    # The retries consumed count once the client commits their offsets (every 5 s for the
    # Java client) and the operator reads them again: the last ones may still count when the
    # dead letters have all arrived.
    def without_retries() -> dict[str, Any] | None:
        found = get(node, "consumergroup", dead_letters.resource, DEMO_NAMESPACE)
        if found is None or (found.get("status") or {}).get("retryDepth") != 0:
            return None
        return found

    found = wait_for(without_retries, 60, "no retry left in the ConsumerGroup's status", node)
    assert found["status"]["deadLetterTopic"] == dead_letter_topic(group)


def test_dead_letter_jobs_drain_and_reprocess_as_job_pods(
    examples: Node, dead_letters: RetryGroup
) -> None:
    node = examples
    expected = dead_letters.dead_letters
    wait_for(
        lambda: dlq_depth_everywhere(node, dead_letters)[1] == expected,
        60,
        "dead letters on the brokers",
    )
    stored_before = topic_total(node, dead_letters.topic)
    name = dead_letters.resource
    drained = run_job(
        node,
        f"{name}-drain",
        dead_letters.resource,
        {
            "action": "Drain",
            "filter": "properties['index'] in ('0', '2')",
            "sink": {"format": "parquet", "path": "file:///tmp/dlq-archive/"},
        },
    )
    assert drained["status"]["phase"] == "Succeeded", drained["status"]
    counts = drained["status"]["counts"]
    assert counts == termination_message(node, f"{name}-drain-1")["counts"]
    assert (counts["read"], counts["matched"], counts["archived"]) == (expected, 2, 2), counts
    reprocessed = run_job(
        node,
        f"{name}-reprocess",
        dead_letters.resource,
        {"action": "Reprocess", "target": {"topic": dead_letters.topic}},
    )
    assert reprocessed["status"]["phase"] == "Succeeded", reprocessed["status"]
    counts = reprocessed["status"]["counts"]
    assert counts == termination_message(node, f"{name}-reprocess-1")["counts"]
    assert counts["resent"] == expected - 2, counts
    # The resent messages are in the topic again; none is left in the dead-letter queue.
    assert topic_total(node, dead_letters.topic) == stored_before + expected - 2
    wait_for(
        lambda: dlq_depth_everywhere(node, dead_letters) == (0, 0),
        60,
        "an empty dead-letter queue",
        node,
    )
