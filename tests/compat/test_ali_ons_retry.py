"""ali-ons' retries against reconsume: a listener that throws makes ali-ons send the message
back (CONSUMER_SEND_MSG_BACK with its ``maxReconsumeTimes``); the brokers redeliver it through
``%RETRY%<group>`` after their (test-shortened) delay levels, and dead-letter it into
``%DLQ%<group>`` once it failed the maximum number of times. The dead letters are read with
our own protocol-level client."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from reconsume.message.model import StoredMessage
from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import RequestCode, ResponseCode

from ..integration.retry_support import TEST_DELAYS_MS, read_queue
from ..integration.wire_client import BrokerClient
from .ali_ons_support import (
    TAG,
    ali_ons_cluster,
    all_queues,
    background_consumer,
    check_protocol,
    committed_at_queue_ends,
    run_driver,
)
from .conftest import NodeProject
from .servers import Cluster, create_topic

TOPIC = "ali-ons-retry"
GROUP = "GID_ali_ons_retry"
MAX_RECONSUME_TIMES = 2
FAIL_CYCLE = ("always", "1", "0", "return-retry")
"""Per message, round robin, what the listener does: throws on every delivery (a dead letter
after three), throws on the first delivery only (consumed on the second), consumes it, returns
``Consumer.ACTION_RETRY`` on every delivery."""
DELIVERIES = {"always": [0, 1, 2], "1": [0, 1], "0": [0], "return-retry": [0, 1]}
"""The reconsume times of each delivery ali-ons makes, by ``FAIL_CYCLE`` entry. ali-ons honours
ACTION_RETRY only from a first delivery: it hands a retry to the listener through a wrapper that
drops the listener's return value, so a retry returning ACTION_RETRY counts as consumed."""
COUNT = 4 * len(FAIL_CYCLE)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with ali_ons_cluster(tmp_path) as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


async def dead_letters(cluster: Cluster) -> dict[str, list[StoredMessage]]:
    """broker → every message of its ``%DLQ%<group>``."""
    async with BrokerClient() as client:
        return {
            name: await read_queue(client, broker.address, dead_letter_topic(GROUP))
            for name, broker in cluster.brokers.items()
        }


def fail_of(sent: dict[str, Any]) -> str:
    """The ``FAIL_CYCLE`` entry of a message the driver sent."""
    return FAIL_CYCLE[sent["index"] % len(FAIL_CYCLE)]


def retry_delay_ms(reconsume_times: int) -> int:
    """The wait before a retry of a delivery with ``reconsume_times`` (the broker chooses
    level 3 + reconsume times)."""
    return TEST_DELAYS_MS[3 + reconsume_times - 1]


@pytest.mark.slow
def test_ali_ons_failed_messages_are_retried_then_dead_lettered(
    ali_ons: NodeProject, cluster: Cluster
) -> None:
    options = {"namesrv": cluster.namesrv.address, "topic": TOPIC, "group": GROUP, "tag": TAG}
    with background_consumer(
        ali_ons, instance="retrying", **{"max-reconsume-times": MAX_RECONSUME_TIMES}, **options
    ) as consumer:
        # It pulls the topic and its group's retry topic (one queue on each broker).
        consumer.wait_for(lambda: consumer.assigned(TOPIC) == all_queues(), "every queue")
        retry_queues = ["broker-a/0", "broker-b/0"]
        consumer.wait_for(lambda: consumer.assigned(retry_topic(GROUP)) == retry_queues, "retries")
        produced = run_driver(
            ali_ons,
            "produce",
            concurrency=1,
            count=COUNT,
            prefix="retried message",
            **{"fail-cycle": ",".join(FAIL_CYCLE)},
            **options,
        )
        sent = produced["sent"]
        assert {s["status"] for s in sent} == {"SEND_OK"}
        poison = [s for s in sent if fail_of(s) == "always"]
        expected = sum(len(DELIVERIES[fail_of(s)]) for s in sent)

        def settled() -> bool:
            letters = asyncio.run(dead_letters(cluster))
            return (
                sum(map(len, letters.values())) == len(poison)
                and len(consumer["received"]) == expected
            )

        consumer.wait_for(settled, "dead letters and retries", timeout_s=25)
        committed_at_queue_ends(cluster, GROUP, TOPIC)
        committed_at_queue_ends(cluster, GROUP, retry_topic(GROUP), queues=1)
        run = consumer.close()

    check_protocol(
        run,
        {
            RequestCode.HEART_BEAT,
            RequestCode.PULL_MESSAGE,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            RequestCode.UPDATE_CONSUMER_OFFSET,
        },
    )
    # Every failure was sent back, and the broker took each: ali-ons never fell back to
    # sending to the retry topic itself.
    send_backs = [e for e in run["rpc"] if e["code"] == RequestCode.CONSUMER_SEND_MSG_BACK]
    assert len(send_backs) == sum(len(DELIVERIES[fail_of(s)]) - 1 for s in sent) + len(poison)
    assert {e["responseCode"] for e in send_backs} == {ResponseCode.SUCCESS}
    assert not [e for e in run["rpc"] if e["code"] == RequestCode.SEND_MESSAGE_V2]

    deliveries: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in run["received"]:
        deliveries[int(r["properties"]["index"])].append(r)
    assert sorted(deliveries) == list(range(COUNT))
    for s in sent:
        got = deliveries[s["index"]]
        assert [r["reconsumeTimes"] for r in got] == DELIVERIES[fail_of(s)], got
        first = got[0]
        assert (first["msgId"], first["fromRetryTopic"]) == (s["msgId"], False)
        for before, retry in pairwise(got):
            # Redelivered through the broker's retry topic (ali-ons hands it over under the
            # original topic) after the delay of level 3 + reconsume times, with the body and
            # properties it was sent with and what the send-back added.
            assert retry["fromRetryTopic"]
            assert cluster.broker_of(retry["storeHost"]) == s["brokerName"]
            assert (retry["topic"], retry["body"]) == (TOPIC, s["body"])
            assert retry["bornTimestamp"] == first["bornTimestamp"]
            delay = retry_delay_ms(before["reconsumeTimes"])
            assert retry["at"] - before["at"] >= delay, (before, retry)
            assert retry["storeTimestamp"] - before["at"] >= delay, (before, retry)
            properties = dict(retry["properties"])
            assert properties.pop("RECONSUME_SCHEDULE_OFFSET").isdigit()
            assert properties == retried_properties(s)

    # The dead letters: exactly the messages that always failed, each once, on the broker it
    # was sent to, as the last retry was, failed MAX + 1 times.
    letters = asyncio.run(dead_letters(cluster))
    by_body = {}
    for name, messages in letters.items():
        assert [m.queue_offset for m in messages] == list(range(len(messages)))
        for message in messages:
            by_body[message.body.decode()] = (name, message)
    assert len(by_body) == sum(map(len, letters.values())) == len(poison)
    for s in poison:
        name, message = by_body[s["body"]]
        last = deliveries[s["index"]][-1]
        assert name == s["brokerName"]
        assert (message.topic, message.queue_id) == (dead_letter_topic(GROUP), 0)
        assert message.reconsume_times == MAX_RECONSUME_TIMES + 1
        assert message.born_timestamp_ms == last["bornTimestamp"]
        properties = dict(message.properties)
        assert int(properties.pop("RECONSUME_DLQ_TIME")) >= last["at"]
        assert properties == {
            **retried_properties(s),
            "RECONSUME_SCHEDULE_OFFSET": last["properties"]["RECONSUME_SCHEDULE_OFFSET"],
            "DELAY": "0",
            "DLQ_ORIGIN_TOPIC": TOPIC,
            "DLQ_ORIGIN_MESSAGE_ID": s["msgId"],
            "RECONSUME_DLQ_REASON": "MAX_RECONSUME_TIMES",
        }


def retried_properties(sent: dict[str, Any]) -> dict[str, str]:
    """The properties of a retry of the message ``sent`` reported: its own (ali-ons' producer
    sets no UNIQ_KEY, so its id is the offset id the send returned), the cluster the broker
    adds, and what a send-back and the schedule add."""
    return {
        "TAGS": TAG,
        "KEYS": f"key-{sent['index']}",
        "index": str(sent["index"]),
        "fail": fail_of(sent),
        "CLUSTER": "ali-ons",
        "RETRY_TOPIC": TOPIC,
        "ORIGIN_MESSAGE_ID": sent["msgId"],
        "REAL_TOPIC": retry_topic(GROUP),
        "REAL_QID": "0",
    }
