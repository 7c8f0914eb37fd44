"""The flags of ``reconsume broker`` and ``reconsume namesrv`` come from the settings'
fields: the help shows each dataclass default, no flags give the defaults, and every flag
lands in its field."""

from __future__ import annotations

import argparse
import dataclasses
import enum
from pathlib import Path
from typing import Any

import pytest

from reconsume.broker.settings import BrokerSettings, ReplicationMode
from reconsume.cli import broker_settings_of, build_parser, main
from reconsume.errors import InvalidArgumentError
from reconsume.flags import Flag, flagged, given_settings
from reconsume.namesrv.settings import NamesrvSettings
from reconsume.store.settings import FlushMode
from reconsume.wire.tls import ClientAuth, TlsMode

TLS_FILES = ["--tls-cert-file", "/tls/tls.crt", "--tls-key-file", "/tls/tls.key"]
TLS_FLAGS = [
    (["--tls-mode", "enforcing", *TLS_FILES],
     {"tls_mode": TlsMode.ENFORCING, "tls_cert_file": "/tls/tls.crt",
      "tls_key_file": "/tls/tls.key"}),
    (["--tls-mode", "permissive", *TLS_FILES],
     {"tls_mode": TlsMode.PERMISSIVE, "tls_cert_file": "/tls/tls.crt",
      "tls_key_file": "/tls/tls.key"}),
    (["--tls-cert-file", "/tls/tls.crt"], {"tls_cert_file": "/tls/tls.crt"}),
    (["--tls-key-file", "/tls/tls.key"], {"tls_key_file": "/tls/tls.key"}),
    (["--tls-ca-file", "/tls/ca.crt"], {"tls_ca_file": "/tls/ca.crt"}),
    (["--tls-client-auth", "required", "--tls-ca-file", "/tls/ca.crt", "--tls-mode",
      "enforcing", *TLS_FILES],
     {"tls_client_auth": ClientAuth.REQUIRED, "tls_ca_file": "/tls/ca.crt",
      "tls_mode": TlsMode.ENFORCING, "tls_cert_file": "/tls/tls.crt",
      "tls_key_file": "/tls/tls.key"}),
]  # fmt: skip
"""The TLS flags, the same on both servers."""

SERVERS = [pytest.param("broker", BrokerSettings), pytest.param("namesrv", NamesrvSettings)]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def help_entries(command: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """``reconsume COMMAND --help`` as {first option string: its entry, whitespace collapsed}."""
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    entries: dict[str, str] = {}
    current: str | None = None
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            entries[current] = line
        elif current is not None and line.startswith("   "):
            entries[current] += " " + line
        else:
            current = None
    return {option: " ".join(entry.split()) for option, entry in entries.items()}


def expected_default(settings: type, field: dataclasses.Field[Any], declared: Flag) -> str:
    """How the help must show the dataclass default of ``field``."""
    defaults = {f.name: f.default for f in dataclasses.fields(settings)}
    if declared.sets:  # --listen: host and port
        return "(default " + ":".join(str(defaults[name]) for name in declared.sets) + ")"
    value = defaults[field.name]
    if value is dataclasses.MISSING:
        return "(required)"
    if value is None or value == ():
        text = declared.empty
    elif isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, enum.Enum):
        text = str(value.value)
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, str) and " " in value:
        text = f"'{value}'"
    else:
        text = str(value)
    return f"(default {text})"


@pytest.mark.parametrize(("command", "settings"), SERVERS)
def test_help_shows_every_flag_with_its_dataclass_default(
    command: str, settings: type, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = help_entries(command, capsys)
    declared_flags = list(flagged(settings))
    assert declared_flags
    for field, declared in declared_flags:
        assert declared.name in entries, f"{declared.name} missing from `{command} --help`"
        assert entries[declared.name].endswith(expected_default(settings, field, declared))


def test_the_broker_help_shows_the_defaults_as_they_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    entries = help_entries("broker", capsys)
    assert entries["--default-queues"].endswith("(default 8)")
    assert entries["--offset-persist-interval-ms"].endswith("(default 5000)")
    assert entries["--listen"].endswith("(default 127.0.0.1:10911)")
    assert entries["--store-dir"].endswith("(required)")


def test_no_flags_give_the_defaults() -> None:
    assert broker_settings_of(parse("broker", "--store-dir", "s")) == BrokerSettings(store_dir="s")
    assert given_settings(BrokerSettings, parse("broker")) == {}
    namesrv = given_settings(NamesrvSettings, parse("namesrv"))
    assert NamesrvSettings(**namesrv) == NamesrvSettings()


BROKER_FLAGS = [
    (["--store-dir", "/data/b"], {"store_dir": "/data/b"}),
    (["--listen", "10.0.0.1:1234"], {"listen_host": "10.0.0.1", "listen_port": 1234}),
    (["--listen", "[::1]:0"], {"listen_host": "::1", "listen_port": 0}),
    (["--advertise", "10.0.0.2:10911"], {"advertised_address": "10.0.0.2:10911"}),
    (["--namesrv", "10.0.0.3:9876; 10.0.0.4:9876;"],
     {"namesrv_addresses": ("10.0.0.3:9876", "10.0.0.4:9876")}),
    (["--broker-name", "broker-b"], {"broker_name": "broker-b"}),
    (["--cluster", "prod"], {"cluster_name": "prod"}),
    (["--broker-id", "1", "--master", "10.0.0.5:10911"],
     {"broker_id": 1, "master_address": "10.0.0.5:10911"}),
    (["--master", "10.0.0.5:10911", "--broker-id", "2"],
     {"broker_id": 2, "master_address": "10.0.0.5:10911"}),
    (["--replication", "Sync"], {"replication": ReplicationMode.SYNC}),
    (["--replica-lag-max-ms", "500"], {"replica_lag_max_ms": 500}),
    (["--replicas", "3"], {"replicas": 3}),
    (["--replication-accept-alone"], {"replication_accept_alone": True}),
    (["--election", "file:/data/lease.json", "--broker-id", "2"],
     {"election": "file:/data/lease.json", "broker_id": 2}),
    (["--election", "kube:prod/broker-a"], {"election": "kube:prod/broker-a"}),
    (["--lease-duration-ms", "2000"], {"lease_duration_ms": 2000}),
    (["--kube-api", "https://10.0.0.1:6443", "--election", "kube:broker-a"],
     {"kube_api": "https://10.0.0.1:6443", "election": "kube:broker-a"}),
    (["--kube-token-file", "/run/token", "--election", "kube:broker-a"],
     {"kube_token_file": "/run/token", "election": "kube:broker-a"}),
    (["--kube-ca-file", "/run/ca.crt", "--election", "kube:broker-a"],
     {"kube_ca_file": "/run/ca.crt", "election": "kube:broker-a"}),
    (["--master-service", "broker-a-master", "--election", "kube:broker-a"],
     {"master_service": "broker-a-master", "master_port": 10912, "election": "kube:broker-a"}),
    (["--master-port", "10922", "--master-service", "m", "--election", "kube:broker-a"],
     {"master_port": 10922, "master_service": "m", "election": "kube:broker-a"}),
    (["--master-grpc-port", "8092", "--master-service", "m", "--election", "kube:broker-a"],
     {"master_grpc_port": 8092, "master_service": "m", "election": "kube:broker-a"}),
    (["--no-auto-create-topic"], {"auto_create_topic": False}),
    (["--auto-create-topic"], {"auto_create_topic": True}),
    (["--no-auto-create-group"], {"auto_create_subscription_group": False}),
    (["--default-queues", "4"], {"default_topic_queue_nums": 4}),
    (["--flush", "Sync"], {"flush_mode": FlushMode.SYNC}),
    (["--offset-persist-interval-ms", "100"], {"offset_persist_interval_ms": 100}),
    (["--delay-levels", "1s 2s"], {"delay_levels": "1s 2s"}),
    (["--timer-max-delay-s", "60"], {"timer_max_delay_s": 60}),
    (["--http-listen", "127.0.0.1:8080"], {"http_listen": "127.0.0.1:8080"}),
    (["--grpc-listen", "127.0.0.1:8081"], {"grpc_listen": "127.0.0.1:8081"}),
    (["--register-interval-s", "2.5"], {"register_interval_s": 2.5}),
    (["--acl-file", "/etc/acl.toml"], {"acl_file": "/etc/acl.toml"}),
    *TLS_FLAGS,
]  # fmt: skip
NAMESRV_FLAGS = [
    (["--listen", "127.0.0.1:0"], {"listen_host": "127.0.0.1", "listen_port": 0}),
    (["--broker-expiry-s", "1"], {"broker_expiry_s": 1.0}),
    (["--scan-interval-s", "0.1"], {"scan_interval_s": 0.1}),
    (["--acl-file", "/etc/acl.toml"], {"acl_file": "/etc/acl.toml"}),
    *TLS_FLAGS,
]


@pytest.mark.parametrize(("argv", "values"), BROKER_FLAGS)
def test_each_broker_flag_sets_its_field(argv: list[str], values: dict[str, Any]) -> None:
    args = parse("broker", *(argv if argv[0] == "--store-dir" else ["--store-dir", "s", *argv]))
    settings = broker_settings_of(args)
    assert {name: getattr(settings, name) for name in values} == values
    assert settings == dataclasses.replace(BrokerSettings(store_dir="s"), **values)


@pytest.mark.parametrize(("argv", "values"), NAMESRV_FLAGS)
def test_each_namesrv_flag_sets_its_field(argv: list[str], values: dict[str, Any]) -> None:
    settings = NamesrvSettings(**given_settings(NamesrvSettings, parse("namesrv", *argv)))
    assert settings == dataclasses.replace(NamesrvSettings(), **values)


@pytest.mark.parametrize(
    ("settings", "cases"), [(BrokerSettings, BROKER_FLAGS), (NamesrvSettings, NAMESRV_FLAGS)]
)
def test_every_flag_has_a_case_above(
    settings: type, cases: list[tuple[list[str], dict[str, object]]]
) -> None:
    tried = {argv[0].replace("--no-", "--") for argv, _values in cases}
    assert tried == {declared.name for _field, declared in flagged(settings)}


def test_flags_override_the_config_file_which_overrides_the_defaults(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('store_dir = "s"\ncluster_name = "from-file"\nauto_create_topic = false\n')
    from_file = broker_settings_of(parse("broker", "--config", str(config)))
    assert (from_file.cluster_name, from_file.auto_create_topic) == ("from-file", False)
    assert from_file.broker_name == BrokerSettings(store_dir="s").broker_name
    # A flag given with the default value still wins over the file.
    flagged_args = parse(
        "broker", "--config", str(config), "--cluster", "DefaultCluster", "--auto-create-topic"
    )
    overridden = broker_settings_of(flagged_args)
    assert (overridden.cluster_name, overridden.auto_create_topic) == ("DefaultCluster", True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--listen", "nowhere"], "setting listen: address 'nowhere' is not host:port"),
        (["--listen", "127.0.0.1:70000"], "setting listen_port: 70000 is not 0-65535"),
        (["--namesrv", "nowhere"], "setting namesrv_addresses: 'nowhere' is not host:port"),
        (["--default-queues", "0"], "setting default_topic_queue_nums: 0 is not 1-1024"),
        (["--tls-mode", "enforcing"], "setting tls_cert_file: required with TLS mode enforcing"),
        (
            ["--tls-mode", "permissive", "--tls-cert-file", "c"],
            "setting tls_key_file: required with TLS mode permissive",
        ),
        (
            ["--tls-client-auth", "optional", *TLS_FILES],
            "setting tls_client_auth: needs a TLS mode other than disabled",
        ),
        (
            ["--tls-client-auth", "required", "--tls-mode", "enforcing", *TLS_FILES],
            "setting tls_ca_file: required with client auth required",
        ),
    ],
)
def test_refused_values_name_the_setting(argv: list[str], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        broker_settings_of(parse("broker", "--store-dir", "s", *argv))
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "argv",
    [
        ["--flush", "Never"],
        ["--default-queues", "many"],
        ["--register-interval-s", "x"],
        ["--tls-mode", "on"],
        ["--tls-client-auth", "require"],
    ],
)
def test_argparse_refuses_what_is_not_a_number_or_a_choice(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("broker", "--store-dir", "s", *argv)
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_the_name_server_refuses_tls_without_its_files() -> None:
    args = parse("namesrv", "--tls-mode", "enforcing")
    with pytest.raises(InvalidArgumentError) as refused:
        NamesrvSettings(**given_settings(NamesrvSettings, args))
    assert str(refused.value) == "setting tls_cert_file: required with TLS mode enforcing"
