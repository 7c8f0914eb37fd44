"""Broker settings from a TOML config file and command-line overrides."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reconsume.broker.config_file import broker_settings, load_config_file
from reconsume.errors import InvalidArgumentError
from reconsume.message.durations import DEFAULT_DELAY_LEVELS
from reconsume.store.settings import FlushMode, StoreSettings

EXAMPLE = """
store_dir = "/data/broker-a"
listen_host = "127.0.0.1"
listen_port = 10911
namesrv_addresses = ["10.0.0.1:9876", "10.0.0.2:9876"]
broker_name = "broker-a"
cluster_name = "prod"
auto_create_topic = false
flush_mode = "Sync"
sync_flush_timeout_ms = 2000
register_interval_s = 10
http_listen = "127.0.0.1:8080"

[store]
commit_log_segment_bytes = 67108864
retention_hours = 48
"""


def load(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return load_config_file(path)


def test_a_full_file_sets_every_key_it_names(tmp_path: Path) -> None:
    settings = broker_settings(load(tmp_path, EXAMPLE))
    assert settings.store_dir == "/data/broker-a"
    assert settings.namesrv_addresses == ("10.0.0.1:9876", "10.0.0.2:9876")
    assert settings.cluster_name == "prod"
    assert settings.auto_create_topic is False
    assert settings.flush_mode is FlushMode.SYNC
    assert settings.sync_flush_timeout_ms == 2000
    assert settings.register_interval_s == 10.0
    assert isinstance(settings.register_interval_s, float)
    assert settings.http_address() == ("127.0.0.1", 8080)
    assert settings.store == StoreSettings(commit_log_segment_bytes=64 << 20, retention_hours=48.0)
    assert settings.delay_levels == DEFAULT_DELAY_LEVELS  # not in the file: the default


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    overrides = {"listen_port": 0, "flush_mode": FlushMode.ASYNC, "namesrv_addresses": ()}
    settings = broker_settings(load(tmp_path, EXAMPLE), overrides)
    assert settings.listen_port == 0
    assert settings.flush_mode is FlushMode.ASYNC
    assert settings.namesrv_addresses == ()
    assert settings.cluster_name == "prod"


def test_no_file_means_defaults_plus_overrides() -> None:
    settings = broker_settings({}, {"store_dir": "/s"})
    assert settings.listen_port == 10911
    assert settings.http_listen is None


@pytest.mark.parametrize(
    ("toml", "setting", "problem"),
    [
        ('listen_prot = 1\nstore_dir = "/s"', "listen_prot", "did you mean listen_port?"),
        ('zzz = 1\nstore_dir = "/s"', "zzz", "known: store_dir, listen_host"),
        ('listen_port = "10911"', "listen_port", "expected an integer, got '10911'"),
        ("listen_port = 10911.0", "listen_port", "expected an integer"),
        ("listen_port = true", "listen_port", "expected an integer, got True"),
        ('auto_create_topic = "yes"', "auto_create_topic", "expected true or false"),
        ("register_interval_s = false", "register_interval_s", "expected a number"),
        ('register_interval_s = "30"', "register_interval_s", "expected a number"),
        ("broker_name = 7", "broker_name", "expected a string, got 7"),
        ('namesrv_addresses = "a:1;b:2"', "namesrv_addresses", "expected a list of strings"),
        ("namesrv_addresses = [1]", "namesrv_addresses", "expected a list of strings"),
        ('flush_mode = "sync"', "flush_mode", "expected one of Async, Sync, got 'sync'"),
        ('http_listen = ["127.0.0.1:1"]', "http_listen", "expected a string"),
        ('store = "big"', "store", "expected a table"),
        ("[store]\nsegment_bytes = 1", "store.segment_bytes", "unknown setting"),
        ('[store]\nflush_mode = "Sync"', "store.flush_mode", "set flush_mode (top level)"),
        (
            "[store]\ntable_flush_interval_ms = 5",
            "store.table_flush_interval_ms",
            "set offset_persist_interval_ms",
        ),
        ('[store]\nretention_hours = "1"', "store.retention_hours", "expected a number"),
        ("[store]\nmax_message_bytes = 10", "store", "max_message_bytes must be at least 1024"),
        ("[store]\nretention_hours = -1", "store", "retention_hours must be positive"),
        ("default_topic_queue_nums = 0", "default_topic_queue_nums", "is not 1-1024"),
        ('delay_levels = "1s 1y"', "delay_levels", "delay 2 ('1y')"),
        ("offset_persist_interval_ms = -1", "offset_persist_interval_ms", "must be positive"),
    ],
)
def test_invalid_files_name_the_setting(
    tmp_path: Path, toml: str, setting: str, problem: str
) -> None:
    values = load(tmp_path, toml)
    values.setdefault("store_dir", "/s")
    with pytest.raises(InvalidArgumentError, match=f"^setting {re.escape(setting)}: .*"):
        broker_settings(values)
    with pytest.raises(InvalidArgumentError, match=re.escape(problem)):
        broker_settings(values)


def test_store_dir_is_required() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^setting store_dir: required"):
        broker_settings({"broker_name": "b"})


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"config file .*absent\.toml: cannot read it"):
        load_config_file(tmp_path / "absent.toml")


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="not valid TOML"):
        load(tmp_path, "brokerName=broker-a\nnamesrvAddr=1.2.3.4:9876;5.6.7.8:9876\n")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'broker_name = "\xe9"\n')
    with pytest.raises(InvalidArgumentError, match="cannot read it"):
        load_config_file(path)
