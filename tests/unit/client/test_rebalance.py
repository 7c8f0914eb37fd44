"""allocate_average against RocketMQ 4.9.8's AllocateMessageQueueAveragely.

The golden cases were worked out by hand from the Java algorithm: the first
``len(queues) % len(consumers)`` consumers (in client-id string order) take one queue more,
and every consumer takes a contiguous range of the queues sorted by topic, broker, queue id.
The properties state the same thing without numbers: the allocations of all consumers,
concatenated in client-id order, are exactly the sorted queues, cut into shares that differ
by at most one, larger shares first.
"""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconsume.client.rebalance import allocate_average
from reconsume.client.routes import MessageQueue


def queues_of(broker: str, count: int, topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(count)]


IDS3 = ["c0", "c1", "c2"]


@pytest.mark.parametrize(
    ("total", "consumers", "expected"),
    [
        # 8 % 3 = 2: the first two consumers take 3, the third 2
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        # fewer queues than consumers: one each, the rest none
        (2, 3, [[0], [1], []]),
        (3, 3, [[0], [1], [2]]),
        (6, 3, [[0, 1], [2, 3], [4, 5]]),
        # 10 % 4 = 2: 3, 3, 2, 2
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        # 12 % 5 = 2: queue ids sort as numbers (10 and 11 last), 3, 3, 2, 2, 2
        (12, 5, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9], [10, 11]]),
        (1, 1, [[0]]),
        (5, 1, [[0, 1, 2, 3, 4]]),
    ],
)
def test_golden_shares(total: int, consumers: int, expected: list[list[int]]) -> None:
    queues = queues_of("broker-a", total)
    ids = [f"c{i}" for i in range(consumers)]
    shares = [[q.queue_id for q in allocate_average(queues, ids, me)] for me in ids]
    assert shares == expected


def test_queues_sort_by_broker_then_queue_id_whatever_the_input_order() -> None:
    a, b = queues_of("broker-a", 3), queues_of("broker-b", 3)
    mixed = [b[2], a[1], b[0], a[2], b[1], a[0]]
    assert allocate_average(mixed, IDS3, "c0") == [a[0], a[1]]
    assert allocate_average(mixed, IDS3, "c1") == [a[2], b[0]]
    assert allocate_average(mixed, IDS3, "c2") == [b[1], b[2]]


def test_client_ids_sort_as_strings_not_as_addresses() -> None:
    # Java's Collections.sort on client ids: "10.0.0.10@7" < "10.0.0.2@7" < "10.0.0.9@7"
    ids = ["10.0.0.9@7", "10.0.0.2@7", "10.0.0.10@7"]
    queues = queues_of("broker-a", 4)
    assert allocate_average(queues, ids, "10.0.0.10@7") == queues[0:2]
    assert allocate_average(queues, ids, "10.0.0.2@7") == queues[2:3]
    assert allocate_average(queues, ids, "10.0.0.9@7") == queues[3:4]


def test_unknown_consumer_and_no_queues_get_nothing() -> None:
    queues = queues_of("broker-a", 4)
    assert allocate_average(queues, IDS3, "stranger") == []
    assert allocate_average(queues, [], "c0") == []
    assert allocate_average([], IDS3, "c0") == []


def test_duplicates_count_once() -> None:
    queues = queues_of("broker-a", 4)
    # c0 listed twice is still one of two consumers: 2 queues each
    assert allocate_average(queues + queues[:2], ["c1", "c0", "c0"], "c0") == queues[:2]
    assert allocate_average(queues, ["c1", "c0", "c0"], "c1") == queues[2:]


# --------------------------------------------------------------------------- properties
queue_sets = st.sets(
    st.builds(
        MessageQueue,
        st.sampled_from(["T", "U"]),
        st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        st.integers(0, 15),
    ),
    min_size=1,
    max_size=40,
)
client_ids = st.lists(
    st.text(alphabet="0123456789.@abc", min_size=1, max_size=12), min_size=1, max_size=12
)


@given(queue_sets, client_ids)
def test_shares_partition_the_queues_in_contiguous_near_equal_ranges(
    queues: set[MessageQueue], ids: list[str]
) -> None:
    consumers = sorted(set(ids))
    shares = [allocate_average(list(queues), ids, me) for me in consumers]
    # disjoint and complete: concatenated in client-id order they are the sorted queues
    assert [q for share in shares for q in share] == sorted(queues)
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1
    total, count = len(queues), len(consumers)
    assert sizes == [total // count + (1 if i < total % count else 0) for i in range(count)]


@given(queue_sets, client_ids, st.randoms(use_true_random=False))
def test_shares_do_not_depend_on_input_order_or_duplicates(
    queues: set[MessageQueue], ids: list[str], rng: Random
) -> None:
    ordered = sorted(queues)
    shuffled_queues = ordered * 2
    rng.shuffle(shuffled_queues)
    shuffled_ids = [*ids, *ids[: len(ids) // 2]]
    rng.shuffle(shuffled_ids)
    for me in ids:
        assert allocate_average(shuffled_queues, shuffled_ids, me) == allocate_average(
            ordered, sorted(set(ids)), me
        )


@given(queue_sets, client_ids, st.text(alphabet="xyz", min_size=1, max_size=3))
def test_a_consumer_not_in_the_list_gets_nothing(
    queues: set[MessageQueue], ids: list[str], me: str
) -> None:
    assert allocate_average(list(queues), ids, me) == []
