"""The peering objects the operator creates at startup, and the settings behind them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from reconsume_operator.config import OperatorConfig
from reconsume_operator.kube import KubeError
from reconsume_operator.main import build_parser, config_from_args, peering_priority
from reconsume_operator.peering import ensure_peering, peering_objects


def test_cluster_wide_operators_need_one_cluster_kopf_peering() -> None:
    found = peering_objects("reconsume", clusterwide=True, namespaces=["shop"])
    assert found == [
        {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
         "metadata": {"name": "reconsume",
                      "labels": {"app.kubernetes.io/managed-by": "reconsume-operator"}}},
    ]  # fmt: skip


def test_namespaced_operators_need_a_kopf_peering_in_every_namespace_named_plainly() -> None:
    found = peering_objects("p", clusterwide=False, namespaces=["shop", "a,b", "shop-*", "!x", "b"])
    assert [(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) for o in found] == [
        ("KopfPeering", "p", "shop"),
        ("KopfPeering", "p", "a"),
        ("KopfPeering", "p", "b"),
    ]
    # Labelled as the operator's: a later `helm install` leaves them alone (docs/install.md).
    assert all(
        o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "reconsume-operator"}
        for o in found
    )


def test_peering_lifetime_and_namespaces_come_from_the_command_line_or_environment() -> None:
    args = build_parser().parse_args(["-n", "shop", "-n", "web", "--peering-lifetime", "15"])
    config = config_from_args(args)
    assert config.peering_lifetime_s == 15
    assert config.namespaces == ("shop", "web")
    env = {"RECONSUME_PEERING_LIFETIME_SECONDS": "20"}
    assert OperatorConfig.from_env(env).peering_lifetime_s == 20
    assert OperatorConfig().peering_lifetime_s == 60
    with pytest.raises(ValueError, match="peering lifetime"):
        OperatorConfig(peering_lifetime_s=0)


def test_priority_is_an_integer_or_random() -> None:
    assert build_parser().parse_args(["-A", "--priority", "20"]).priority == 20
    drawn = {build_parser().parse_args(["-A", "--priority=random"]).priority for _ in range(50)}
    assert all(1 <= value <= 2**31 - 1 for value in drawn)
    assert len(drawn) > 1  # 50 draws from 2**31 values: equal ones are (almost) impossible
    with pytest.raises(SystemExit):
        build_parser().parse_args(["-A", "--priority", "high"])


def test_priority_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["-A"])
    assert peering_priority(args) is None
    monkeypatch.setenv("RECONSUME_PEERING_PRIORITY", "7")
    assert peering_priority(args) == 7
    monkeypatch.setenv("RECONSUME_PEERING_PRIORITY", "random")
    assert 1 <= (peering_priority(args) or 0) <= 2**31 - 1
    assert peering_priority(build_parser().parse_args(["-A", "--priority", "3"])) == 3


def test_a_service_link_variable_in_a_setting_is_named() -> None:
    # What Kubernetes gives a pod for a Service named reconsume-metrics in its namespace.
    env = {"RECONSUME_METRICS_PORT": "tcp://10.96.0.119:9090"}
    with pytest.raises(
        ValueError, match=r"RECONSUME_METRICS_PORT='tcp://10\.96\.0\.119:9090'.*enableServiceLinks"
    ):
        OperatorConfig.from_env(env)


class InstallerRace:
    """A writer that may not create the peering object, which appears after ``appears_after``
    looks (the chart creates it, after the operator's pods may have started)."""

    def __init__(self, appears_after: int | None) -> None:
        self.appears_after = appears_after
        self.looks = 0

    def create_missing(self, obj: dict[str, Any]) -> bool:
        raise KubeError(f"{obj['kind']} reconsume: 403 Forbidden")

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.looks += 1
        if self.appears_after is not None and self.looks > self.appears_after:
            return {"kind": kind, "metadata": {"name": name}}
        return None


def test_startup_waits_for_a_peering_object_its_installer_creates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slept: list[float] = []
    writer = InstallerRace(appears_after=3)
    logger = logging.getLogger("test-peering")
    with caplog.at_level(logging.INFO, logger="test-peering"):
        ensure_peering(
            writer, "reconsume", clusterwide=True, namespaces=(), logger=logger,  # type: ignore[arg-type]
            wait_s=30, sleep=slept.append,
        )  # fmt: skip
    assert slept == [1.0, 1.0, 1.0]
    assert "created by its installer" in caplog.text
    assert "cannot create" not in caplog.text
    # One that never appears: looked for until the deadline, then the warning.
    never = InstallerRace(appears_after=None)
    slept.clear()
    with caplog.at_level(logging.INFO, logger="test-peering"):
        ensure_peering(
            never, "reconsume", clusterwide=True, namespaces=(), logger=logger,  # type: ignore[arg-type]
            wait_s=5, sleep=slept.append,
        )  # fmt: skip
    assert (never.looks, len(slept)) == (5, 5)
    assert "cannot create the peering object ClusterKopfPeering reconsume" in caplog.text
