"""Persisted tables: topic and group configs, consumer and schedule offsets, the ``.bak``
fallback and the error when neither copy is readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconsume.errors import TableError
from reconsume.message.configs import PERM_READ, SubscriptionGroupConfig, TopicConfig
from reconsume.store import MessageStore
from reconsume.store.tables import OffsetTable, consumer_offset_key, group_table, topic_table

from ._helpers import small_settings


def test_config_tables_persist_every_change(tmp_path: Path) -> None:
    topics = topic_table(tmp_path)
    assert (len(topics), topics.version) == (0, 0)
    topics.put("Orders", TopicConfig("Orders", read_queue_nums=4, write_queue_nums=4))
    topics.put("Audit", TopicConfig("Audit", perm=PERM_READ, order=True, attributes={"a": "b"}))
    topics.put("Gone", TopicConfig("Gone"))
    assert topics.delete("Gone")
    assert not topics.delete("Gone")
    groups = group_table(tmp_path)
    policy = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}
    groups.put("g1", SubscriptionGroupConfig("g1", retry_max_times=3, group_retry_policy=policy))

    reloaded = topic_table(tmp_path)
    assert reloaded.version == 4
    assert sorted(reloaded) == ["Audit", "Orders"]
    assert reloaded.get("Orders") == topics.get("Orders")
    assert reloaded.get("Audit") == topics.get("Audit")
    assert "Gone" not in reloaded
    document = json.loads((tmp_path / "topics.json").read_text())
    assert document["topicConfigTable"]["Orders"]["readQueueNums"] == 4
    assert document["dataVersion"]["counter"] == 4
    again = group_table(tmp_path)
    assert again.items() == groups.items()
    expected = SubscriptionGroupConfig("g1", retry_max_times=3, group_retry_policy=policy)
    assert again.get("g1") == expected


def test_offset_tables_persist_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    table = OffsetTable(path)
    assert not table.persist()  # nothing changed, nothing written
    assert not path.exists()
    key = consumer_offset_key("Orders", "g1")
    table.set(key, 0, 10)
    table.set(key, 3, 7)
    table.set("%RETRY%g1@g1", 0, 1)
    assert table.persist()
    assert not table.persist()
    assert table.persist(force=True)
    assert json.loads(path.read_text())["offsetTable"][key] == {"0": 10, "3": 7}
    reloaded = OffsetTable(path)
    assert reloaded.queues(key) == {0: 10, 3: 7}
    assert reloaded.get(key, 3) == 7
    assert reloaded.get(key, 1) is None
    assert reloaded.get("missing", 0) is None
    assert reloaded.remove_where(lambda k: k.startswith("%RETRY%")) == 1
    assert reloaded.remove(key)
    assert not reloaded.remove(key)
    assert reloaded.persist()
    assert OffsetTable(path).keys() == []


def test_store_persists_offsets_and_configs_across_restarts(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_settings()) as store:
        store.topics.put("Orders", TopicConfig("Orders", read_queue_nums=2, write_queue_nums=2))
        store.groups.put("g1", SubscriptionGroupConfig("g1"))
        store.consumer_offsets.set(consumer_offset_key("Orders", "g1"), 1, 42)
        store.schedule_offsets.set("3", 0, 9)
    with MessageStore(tmp_path, small_settings()) as store:
        assert store.topics.get("Orders") == TopicConfig("Orders", 2, 2)
        assert "g1" in store.groups
        assert store.consumer_offsets.get(consumer_offset_key("Orders", "g1"), 1) == 42
        assert store.schedule_offsets.get("3", 0) == 9


@pytest.mark.parametrize("damage", [b'{"offsetTable": {"k": {"0"', b"\xff\xfe", None])
def test_offset_table_falls_back_to_its_backup(tmp_path: Path, damage: bytes | None) -> None:
    path = tmp_path / "delayOffset.json"
    table = OffsetTable(path)
    table.set("1", 0, 100)
    table.persist()
    table.set("1", 0, 200)
    table.persist()  # the first version is now the backup
    assert OffsetTable(path).get("1", 0) == 200
    if damage is None:
        path.unlink()
    else:
        path.write_bytes(damage)  # torn or garbage main file
    assert OffsetTable(path).get("1", 0) == 100


def test_config_table_falls_back_to_its_backup(tmp_path: Path) -> None:
    topics = topic_table(tmp_path)
    topics.put("First", TopicConfig("First"))
    topics.put("Second", TopicConfig("Second"))
    (tmp_path / "topics.json").write_text("{not json")
    reloaded = topic_table(tmp_path)
    assert (sorted(reloaded), reloaded.version) == (["First"], 1)
    reloaded.put("Third", TopicConfig("Third"))  # saving repairs the main file
    assert sorted(topic_table(tmp_path)) == ["First", "Third"]


def test_damaged_table_and_backup_raise_table_error(tmp_path: Path) -> None:
    for name in ("consumerOffset.json", "topics.json"):
        (tmp_path / name).write_bytes(b"\x00garbage")
        (tmp_path / f"{name}.bak").write_text("[1, 2")
    with pytest.raises(TableError, match="backup"):
        OffsetTable(tmp_path / "consumerOffset.json")
    with pytest.raises(TableError):
        topic_table(tmp_path)
    (tmp_path / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": [1]}')
    with pytest.raises(TableError):  # parses, but is not a table
        group_table(tmp_path)
    (tmp_path / "delayOffset.json").write_text('{"offsetTable": {"1": {"0": "x"}}}')
    with pytest.raises(TableError):
        OffsetTable(tmp_path / "delayOffset.json")


def test_store_refuses_to_open_with_unreadable_tables(tmp_path: Path) -> None:
    MessageStore(tmp_path, small_settings()).close()
    config = tmp_path / "config"
    (config / "consumerOffset.json").write_text("{")
    (config / "consumerOffset.json.bak").write_text("{")
    with pytest.raises(TableError):
        MessageStore(tmp_path, small_settings())
    (config / "consumerOffset.json.bak").unlink()
    (config / "consumerOffset.json").unlink()
    with MessageStore(tmp_path, small_settings()) as store:  # the lock was released
        assert store.consumer_offsets.keys() == []
