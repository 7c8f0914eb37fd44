"""Apache RocketMQ's Java push consumer (rocketmq-client 4.9.8, unchanged) against one reconsume
name server and two brokers: two clustering consumers sharing a group (and rebalancing when the
second joins), two broadcasting consumers, and an orderly consumer that suspends its queue.

The Java side is ``java/src/main/java/reconsume/compat/Scenarios.java``.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from reconsume.message.names import dead_letter_topic, retry_topic
from reconsume.wire.codes import RequestCode

from .conftest import JavaClient
from .driver_support import Event, once_each, position, queue_set
from .java_client_support import CONSUMING, check_protocol, run_driver
from .servers import (
    Cluster,
    Queue,
    all_queues,
    committed_at_queue_ends,
    compat_cluster,
    create_topic,
    read_queues,
)

TOPIC = "java-consumers"
GROUP = "java_consumers_group"
BROKER_OFFSETS = {RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with compat_cluster(tmp_path / "servers") as started:
        asyncio.run(create_topic(started, TOPIC))
        yield started


def test_java_clustering_consumers_share_the_queues(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    count = 100
    run = run_driver(
        java_client, cluster, "clustering", tmp_path, topic=TOPIC, group=GROUP, count=count,
        prefix="round",
    )  # fmt: skip

    # c1 hears from the brokers that c2 joined (NOTIFY_CONSUMER_IDS_CHANGED).
    check_protocol(run, CONSUMING | {RequestCode.NOTIFY_CONSUMER_IDS_CHANGED})

    # Alone, c1 pulls all 8 queues; once c2 has joined each pulls 4 of them, none twice.
    alone, *shared_events = run["assigned"]
    assert alone["consumer"] == "c1"
    assert queue_set(alone["queues"], TOPIC) == all_queues()
    shared = {e["consumer"]: queue_set(e["queues"], TOPIC) for e in shared_events}
    assert sorted(shared) == ["c1", "c2"]
    assert len(shared["c1"]) == len(shared["c2"]) == len(all_queues()) // 2
    assert shared["c1"] | shared["c2"] == all_queues()

    sent = {s["body"]: s for s in run["sent"]}
    first = {b for b in sent if b.startswith("round first ")}
    second = {b for b in sent if b.startswith("round second ")}
    assert len(first) == len(second) == count
    received = run["received"]
    assert {r["body"] for r in received} == first | second

    # The first round went to c1 alone, each message once (and c2, which joined after c1 had
    # committed its offsets, got none of it again).
    by_c1 = once_each(r for r in received if r["body"] in first)
    assert {r["consumer"] for r in by_c1.values()} == {"c1"}
    # The second round: each message exactly once, from the consumer that pulls its queue;
    # both got a share.
    by_owner = once_each(r for r in received if r["body"] in second)
    for body, r in by_owner.items():
        assert position(r) == position(sent[body])
        assert position(r) in shared[r["consumer"]], r
        assert (r["msgId"], r["queueOffset"]) == (sent[body]["msgId"], sent[body]["queueOffset"])
    per_consumer = Counter(r["consumer"] for r in by_owner.values())
    assert per_consumer.keys() == {"c1", "c2"}, per_consumer

    assert committed_at_queue_ends(cluster, GROUP, TOPIC) == Counter(
        position(s) for s in sent.values()
    )


def test_java_broadcasting_consumers_each_get_every_message(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    count = 60
    run = run_driver(
        java_client, cluster, "broadcasting", tmp_path, topic=TOPIC, group=GROUP, count=count,
        prefix="broadcast",
    )  # fmt: skip

    # Broadcasting consumers keep their offsets themselves and ask for no consumer list.
    check_protocol(run, CONSUMING - BROKER_OFFSETS - {RequestCode.GET_CONSUMER_LIST_BY_GROUP})
    made = {e["code"] for e in run["request"]}
    assert not made & (BROKER_OFFSETS | {RequestCode.GET_CONSUMER_LIST_BY_GROUP})
    assigned = {e["consumer"]: queue_set(e["queues"], TOPIC) for e in run["assigned"]}
    assert assigned == {"b1": all_queues(), "b2": all_queues()}
    sent = {s["body"]: s for s in run["sent"]}
    assert len(sent) == count
    for consumer in ("b1", "b2"):
        received = once_each(r for r in run["received"] if r["consumer"] == consumer)
        assert set(received) == set(sent)
        for body, r in received.items():
            s = sent[body]
            assert (r["msgId"], *position(r), r["queueOffset"]) == (
                s["msgId"], *position(s), s["queueOffset"],
            )  # fmt: skip
            assert r["reconsumeTimes"] == 0


SUSPEND = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


def test_java_orderly_consumer_keeps_each_queue_in_order(
    java_client: JavaClient, cluster: Cluster, tmp_path: Path
) -> None:
    count, keys, suspend_every, suspend_ms, poison_seq, max_reconsume = 120, 12, 5, 100, 7, 2
    run = run_driver(
        java_client, cluster, "orderly", tmp_path, topic=TOPIC, group=GROUP, count=count,
        keys=keys, suspend_every=suspend_every, suspend_ms=suspend_ms, poison_seq=poison_seq,
        max_reconsume=max_reconsume, prefix="order",
    )  # fmt: skip
    check_protocol(run, CONSUMING | {RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ})
    (assigned,) = run["assigned"]
    assert queue_set(assigned["queues"], TOPIC) == all_queues()

    # The selector put each key's messages in one queue, in sequence; 12 keys over 8 queues,
    # so four queues carry two keys interleaved.
    sent = run["sent"]
    assert len(sent) == count
    queue_of_key: dict[int, set[Queue]] = defaultdict(set)
    for s in sent:
        queue_of_key[s["key"]].add(position(s))
    assert all(len(queues) == 1 for queues in queue_of_key.values()), queue_of_key
    assert {q for queues in queue_of_key.values() for q in queues} == all_queues()

    # Per queue, the listener saw exactly the queue's messages in offset order. A message it
    # suspended the queue on came again next, with reconsumeTimes 1, after the pause, and
    # nothing of that queue in between; one it always suspends on came 1 + max_reconsume
    # times, then the queue moved on.
    expected: dict[Queue, list[tuple[int, int, str]]] = defaultdict(list)
    for s in sorted(sent, key=lambda s: (position(s), s["queueOffset"])):
        offset = s["queueOffset"]
        if s["seq"] == poison_seq:
            expected[position(s)] += [(offset, n, SUSPEND) for n in range(max_reconsume + 1)]
        elif s["seq"] % suspend_every == suspend_every - 1:
            expected[position(s)] += [(offset, 0, SUSPEND), (offset, 1, "SUCCESS")]
        else:
            expected[position(s)].append((offset, 0, "SUCCESS"))
    seen: dict[Queue, list[Event]] = defaultdict(list)
    for r in run["received"]:
        seen[position(r)].append(r)
    assert seen.keys() == expected.keys()
    for queue, events in seen.items():
        handled = [(r["queueOffset"], r["reconsumeTimes"], r["result"]) for r in events]
        assert handled == expected[queue], queue
        for before, after in pairwise(events):
            if before["result"] == SUSPEND and after["queueOffset"] == before["queueOffset"]:
                assert after["receivedAt"] - before["receivedAt"] >= suspend_ms

    # Each key's messages were consumed in the order sent, but for the one given up on.
    consumed: dict[str, list[int]] = defaultdict(list)
    for r in run["received"]:
        if r["result"] == "SUCCESS":
            consumed[r["properties"]["key"]].append(int(r["properties"]["seq"]))
    in_order = [seq for seq in range(count // keys) if seq != poison_seq]
    assert consumed == {str(key): in_order for key in range(keys)}

    # The client sent each message it gave up on to %RETRY%<group> with its reconsume times
    # (a broker of its choice); the broker dead-lettered it at once. Read with our wire client.
    poison = {s["body"]: s for s in sent if s["seq"] == poison_seq}
    assert sum(map(len, read_queues(cluster, retry_topic(GROUP)).values())) == 0
    letters = [
        m for found in read_queues(cluster, dead_letter_topic(GROUP)).values() for m in found
    ]
    assert sorted(m.body.decode() for m in letters) == sorted(poison)
    for letter in letters:
        s = poison[letter.body.decode()]
        assert (letter.reconsume_times, letter.uniq_key) == (max_reconsume, s["msgId"])
        assert letter.properties["DLQ_ORIGIN_TOPIC"] == TOPIC
        assert letter.properties["RECONSUME_DLQ_REASON"] == "MAX_RECONSUME_TIMES"
