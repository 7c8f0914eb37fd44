"""BrokerSettings validation: every refusal names its setting."""

from __future__ import annotations

import re
from typing import Any

import pytest

from reconsume.broker.settings import BrokerSettings
from reconsume.errors import InvalidArgumentError
from reconsume.message.address import HostAddress
from reconsume.store.settings import FlushMode, StoreSettings


@pytest.fixture(autouse=True)
def no_own_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's host name has no address to advertise (whatever its /etc/hosts says)."""
    monkeypatch.setattr("reconsume.broker.listening.own_address", lambda _host: None)


def settings(**changes: Any) -> BrokerSettings:
    return BrokerSettings(**{"store_dir": "/tmp/store", **changes})


def test_defaults_are_valid() -> None:
    default = settings()
    assert default.http_address() is None
    assert default.advertised(10911) == HostAddress.parse("127.0.0.1:10911")


@pytest.mark.parametrize(
    ("changes", "setting", "problem"),
    [
        ({"store_dir": ""}, "store_dir", "must name a directory"),
        ({"listen_host": "localhost"}, "listen_host", "is not an IP address"),
        ({"listen_port": 65536}, "listen_port", "is not 0-65535"),
        ({"listen_port": -1}, "listen_port", "is not 0-65535"),
        ({"advertised_address": "nowhere"}, "advertised_address", "is not host:port"),
        ({"advertised_address": "0.0.0.0:1"}, "advertised_address", "clients can reach"),
        ({"listen_host": "0.0.0.0"}, "advertised_address", "required when listening on 0.0.0.0"),
        ({"listen_host": "::"}, "advertised_address", "has no other address to tell them"),
        ({"namesrv_addresses": ("a:1", "b")}, "namesrv_addresses", "'b' is not host:port"),
        ({"namesrv_addresses": ("a:0",)}, "namesrv_addresses", "'a:0' is not host:port"),
        ({"namesrv_addresses": (":1",)}, "namesrv_addresses", "is not host:port"),
        ({"broker_name": "a b"}, "broker_name", "must be letters, digits"),
        ({"cluster_name": ""}, "cluster_name", "(non-empty)"),
        ({"broker_id": -1}, "broker_id", "is negative"),
        ({"broker_id": 1}, "master_address", "required for a replica"),
        ({"master_address": "127.0.0.1:10911"}, "master_address", "follows no master"),
        (
            {"broker_id": 1, "master_address": "nowhere"},
            "master_address",
            "nowhere",
        ),
        ({"replication": "sync"}, "replication", "is not Async or Sync"),
        ({"replica_lag_max_ms": 0}, "replica_lag_max_ms", "must be positive"),
        ({"election": "etcd:x"}, "election", "is not file:PATH"),
        (
            {"election": "file:l", "broker_id": 1, "master_address": "127.0.0.1:1"},
            "master_address",
            "the lease names the master",
        ),
        ({"election": "file:l", "lease_duration_ms": 10}, "lease_duration_ms", "at least 300"),
        ({"master_service": "m"}, "master_service", "only with a Kubernetes Lease election"),
        (
            {"election": "file:l", "master_service": "m"},
            "master_service",
            "only with a Kubernetes Lease election",
        ),
        ({"election": "kube:b", "master_service": "B_1"}, "master_service", "is not a DNS label"),
        (
            {"election": "kube:b", "master_service": "m", "master_port": 10911},
            "master_port",
            "port 10911 is the remoting port",
        ),
        (
            {"election": "kube:b", "master_service": "m", "master_grpc_port": 70000},
            "master_grpc_port",
            "70000 is not 0-65535",
        ),
        (
            {"election": "kube:b", "master_service": "m", "grpc_listen": "0.0.0.0:8082"},
            "master_grpc_port",
            "port 8082 is the gRPC port",
        ),
        (
            {"election": "kube:b", "master_service": "m", "master_grpc_port": 10912},
            "master_grpc_port",
            "port 10912 is the master port",
        ),
        ({"default_topic_queue_nums": 0}, "default_topic_queue_nums", "is not 1-1024"),
        ({"default_topic_queue_nums": 1025}, "default_topic_queue_nums", "is not 1-1024"),
        ({"flush_mode": "sync"}, "flush_mode", "is not Async or Sync"),
        ({"sync_flush_timeout_ms": 0}, "sync_flush_timeout_ms", "must be positive"),
        ({"offset_persist_interval_ms": -5}, "offset_persist_interval_ms", "must be positive"),
        ({"timer_max_delay_s": 0}, "timer_max_delay_s", "must be positive"),
        ({"delay_levels": ""}, "delay_levels", "no delay levels"),
        ({"delay_levels": "1s 2x"}, "delay_levels", "delay 2 ('2x')"),
        ({"http_listen": "8080"}, "http_listen", "is not host:port"),
        ({"http_listen": "localhost:8080"}, "http_listen", "has no valid IP address"),
        ({"http_listen": "127.0.0.1:65536"}, "http_listen", "port 65536 is not 0-65535"),
        ({"http_listen": "127.0.0.1:10911"}, "http_listen", "is the remoting port"),
        ({"http_listen": "0.0.0.0:10911"}, "http_listen", "is the remoting port"),
        ({"http_listen": ":10911"}, "http_listen", "is the remoting port"),
        ({"http_listen": ":65536"}, "http_listen", "port 65536 is not 0-65535"),
        ({"grpc_listen": ":x"}, "grpc_listen", "is not host:port"),
        ({"listen_host": ""}, "advertised_address", "required when listening on :10911"),
        ({"register_interval_s": 0.0}, "register_interval_s", "is not positive"),
        ({"register_interval_s": float("nan")}, "register_interval_s", "is not positive"),
        ({"register_interval_s": float("inf")}, "register_interval_s", "is not positive"),
        ({"metrics_max_queue_series": -1}, "metrics_max_queue_series", "must not be negative"),
        ({"store": {"retention_hours": 1}}, "store", "is not StoreSettings"),
    ],
)
def test_invalid_values_name_the_setting(
    changes: dict[str, Any], setting: str, problem: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^setting {setting}: .*{re.escape(problem)}"):
        settings(**changes)


def test_http_may_share_the_port_number_on_another_address() -> None:
    shared = settings(http_listen="127.0.0.2:10911")
    assert shared.http_address() == ("127.0.0.2", 10911)
    assert settings(listen_port=0, http_listen="127.0.0.1:0").http_address() == ("127.0.0.1", 0)
    assert settings(http_listen="[::1]:8080").http_address() == ("::1", 8080)


def test_on_every_interface_the_host_names_address_is_advertised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = []

    def own(host: str) -> str:
        asked.append(host)
        return "fd00::6" if host == "" else "10.1.2.3"

    monkeypatch.setattr("reconsume.broker.listening.own_address", own)
    assert settings(listen_host="").advertised(10911) == HostAddress.parse("[fd00::6]:10911")
    assert settings(listen_host="0.0.0.0", listen_port=0).advertised(40001) == HostAddress.parse(
        "10.1.2.3:40001"
    )
    assert settings(listen_host="0.0.0.0", advertised_address="10.9.9.9:1").advertised(
        10911
    ) == HostAddress.parse("10.9.9.9:1")
    assert asked == ["", "0.0.0.0"]  # not looked up when given


def test_every_interface_is_an_empty_host() -> None:
    every = settings(listen_host="", advertised_address="10.0.0.5:10911", http_listen=":8080")
    assert every.http_address() == ("", 8080)
    assert every.advertised(10911) == HostAddress.parse("10.0.0.5:10911")
    assert settings(grpc_listen=":8081").grpc_address() == ("", 8081)
    # The HTTP port on every interface shares no port number with the remoting port's.
    with pytest.raises(InvalidArgumentError, match=r"^setting http_listen: .*remoting port"):
        settings(listen_port=8080, http_listen=":8080")


def test_store_settings_take_the_brokers_flush_mode_and_offset_interval() -> None:
    store = StoreSettings(flush_mode=FlushMode.ASYNC, table_flush_interval_ms=1)
    merged = settings(
        store=store, flush_mode=FlushMode.SYNC, offset_persist_interval_ms=250
    ).store_settings()
    assert (merged.flush_mode, merged.table_flush_interval_ms) == (FlushMode.SYNC, 250)
