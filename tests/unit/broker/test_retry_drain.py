"""Lowering retryQueueNums on a broker context over a real store: the write count drops at once,
retries meant for removed queues go to remaining ones, and the read count drops once the
group's committed offsets reach the end of the removed queues."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.broker.context import BrokerContext
from reconsume.broker.retry_drain import RetryDrain
from reconsume.broker.settings import BrokerSettings
from reconsume.message.address import HostAddress
from reconsume.message.configs import PERM_READ_WRITE, SubscriptionGroupConfig, TopicConfig
from reconsume.message.names import retry_topic
from reconsume.store import MessageStore, PutRequest, StoreSettings
from reconsume.store.tables import consumer_offset_key
from tests.polling import eventually_async

GROUP = "g"
RETRY = retry_topic(GROUP)
KEY = consumer_offset_key(RETRY, GROUP)


class Changes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    settings = StoreSettings(
        commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
    )
    host = HostAddress.parse("127.0.0.1:10911")
    with MessageStore(tmp_path, settings, store_host=host, background=False) as opened:
        yield opened


def make_context(store: MessageStore, changes: Changes) -> BrokerContext:
    settings = BrokerSettings(store_dir=str(store.root), store=store.settings)
    return BrokerContext(settings, store, HostAddress.parse("127.0.0.1:10911"), changes)


def counts(context: BrokerContext) -> tuple[int, int]:
    config = context.topic(RETRY)
    assert config is not None
    return config.read_queue_nums, config.write_queue_nums


def retry(queue_id: int) -> PutRequest:
    return PutRequest(topic=RETRY, queue_id=queue_id, body=b"retry")


def lower_to_one(context: BrokerContext) -> None:
    config = SubscriptionGroupConfig(GROUP, retry_queue_nums=1)
    context.store.groups.put(GROUP, config)
    context.group_updated(config)


def test_lowering_keeps_removed_queues_readable_until_the_group_drains_them(
    store: MessageStore,
) -> None:
    changes = Changes()
    context = make_context(store, changes)
    context.ensure_topic(RETRY, 4, PERM_READ_WRITE)
    for queue_id in range(4):
        context.append(retry(queue_id))
    context.append(retry(3))
    store.consumer_offsets.set(KEY, 1, 1)  # queue 1 consumed, 2 and 3 not
    before = changes.count

    lower_to_one(context)
    assert counts(context) == (4, 1)
    assert changes.count == before + 1  # name servers hear of the new write count at once
    assert context.retry_drain.draining == {RETRY}

    # A retry scheduled for queue 3 before the change lands in queue 0.
    result = context.append(retry(3))
    assert (store.max_offset(RETRY, 0), store.max_offset(RETRY, 3)) == (2, 2)
    assert result.queue_offset == 1

    context.retry_drain.check_all()
    assert counts(context) == (4, 1)
    store.consumer_offsets.set(KEY, 3, 2)  # queue 3 drained; queue 2 still holds one
    context.retry_drain.check_all()
    assert counts(context) == (3, 1)
    store.consumer_offsets.set(KEY, 2, 1)
    context.retry_drain.check_all()
    assert counts(context) == (1, 1)
    assert context.retry_drain.draining == set()
    assert changes.count == before + 3


def test_an_idle_group_is_lowered_at_once_and_raising_adds_queues(store: MessageStore) -> None:
    context = make_context(store, Changes())
    context.ensure_topic(RETRY, 4, PERM_READ_WRITE)
    lower_to_one(context)
    assert counts(context) == (1, 1)  # nothing stored in the removed queues
    raised = SubscriptionGroupConfig(GROUP, retry_queue_nums=3)
    context.group_updated(raised)
    assert counts(context) == (3, 3)


def test_a_group_without_a_retry_topic_gets_none(store: MessageStore) -> None:
    context = make_context(store, Changes())
    context.group_updated(SubscriptionGroupConfig(GROUP, retry_queue_nums=1))
    assert context.topic(RETRY) is None


def test_an_admin_update_of_the_retry_topic_drains_too(store: MessageStore) -> None:
    context = make_context(store, Changes())
    context.ensure_topic(RETRY, 2, PERM_READ_WRITE)
    context.append(retry(1))
    stored = context.update_topic(TopicConfig(RETRY, read_queue_nums=1, write_queue_nums=1))
    assert (stored.read_queue_nums, stored.write_queue_nums) == (2, 1)
    store.consumer_offsets.set(KEY, 1, 1)
    context.retry_drain.check_all()
    assert counts(context) == (1, 1)
    # Other topics are stored as asked.
    plain = context.update_topic(TopicConfig("orders", read_queue_nums=1, write_queue_nums=4))
    assert (plain.read_queue_nums, plain.write_queue_nums) == (1, 4)


def test_a_restarted_broker_resumes_draining_and_deleted_topics_are_forgotten(
    store: MessageStore,
) -> None:
    context = make_context(store, Changes())
    context.ensure_topic(RETRY, 4, PERM_READ_WRITE)
    context.append(retry(2))
    lower_to_one(context)
    restarted = RetryDrain(store, context.put_topic)
    assert restarted.draining == {RETRY}
    context.delete_topic(RETRY)
    assert context.retry_drain.draining == set()
    restarted.check(RETRY)  # the topic is gone: nothing to do, and no longer followed
    assert restarted.draining == set()


def test_the_periodic_check_lowers_the_read_count_and_stops(store: MessageStore) -> None:
    context = make_context(store, Changes())
    context.ensure_topic(RETRY, 2, PERM_READ_WRITE)
    context.append(retry(1))
    lower_to_one(context)
    drain = RetryDrain(store, context.put_topic, interval_s=0.01)

    async def scenario() -> tuple[int, int]:
        drain.start()
        try:
            store.consumer_offsets.set(KEY, 1, 1)
            await eventually_async(
                lambda: counts(context) == (1, 1), 5, "read count lowered", interval_s=0.01
            )
        finally:
            await drain.stop()
        return counts(context)

    assert asyncio.run(scenario()) == (1, 1)
