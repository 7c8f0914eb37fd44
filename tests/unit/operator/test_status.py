"""Conditions, status patches and BrokerCluster phases, as pure functions; the documents fit
the CRDs' status schemas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconsume.client.admin import BrokerInfo
from reconsume.topology.clusters import cluster_spec
from reconsume_operator import status as statuses
from reconsume_operator.clusters import cluster_status
from reconsume_operator.conditions import READY, Condition, merge_conditions, ready_of
from reconsume_operator.config import OperatorConfig, backoff_delay_s

from ..crds.schema import load_crds, root_schema, validate

CRDS = load_crds()
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)


def status_schema(kind: str) -> dict:
    return root_schema(CRDS[kind])["properties"]["status"]


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = merge_conditions(None, [Condition(READY, True, "Reconciled", "ok")], 1, NOW)
    again = merge_conditions(first, [Condition(READY, True, "Reconciled", "still ok")], 2, LATER)
    assert again[0]["lastTransitionTime"] == "2025-03-01T12:00:00Z"
    assert again[0]["message"] == "still ok"
    assert again[0]["observedGeneration"] == 2
    flipped = merge_conditions(again, [Condition(READY, False, "BrokerUnreachable", "x")], 2, LATER)
    assert flipped[0]["lastTransitionTime"] == "2025-03-01T12:05:00Z"
    assert flipped[0]["status"] == "False"


def test_merging_replaces_by_type_and_keeps_the_others() -> None:
    current = merge_conditions(None, statuses.reconciled(True, "Reconciled", "ok"), 1, NOW)
    merged = merge_conditions(current, statuses.paused(), 1, LATER)
    assert [c["type"] for c in merged] == ["Ready", "Paused", "Conflict"]
    assert ready_of(merged) == current[0]
    assert next(c for c in merged if c["type"] == "Paused")["status"] == "True"


def test_a_conflict_says_who_owns_the_name() -> None:
    patch = statuses.status_patch(None, 3, NOW, statuses.conflict("group", "G", "orders", "old"))
    ready = ready_of(patch["conditions"])
    assert ready is not None
    assert ready["status"] == "False"
    assert ready["reason"] == "Conflict"
    assert "older resource old" in ready["message"]
    assert patch["observedGeneration"] == 3
    assert validate(status_schema("ConsumerGroup"), patch) == []


def test_a_group_status_patch_fits_the_crd() -> None:
    fields = {
        "groupName": "G",
        "retryTopic": "%RETRY%G",
        "deadLetterTopic": "%DLQ%G",
        "retryDepth": 0,
        "deadLetterDepth": 2,
        "brokers": [{"name": "b", "address": "127.0.0.1:1", "ready": True, "retryDepth": 0}],
    }
    patch = statuses.status_patch(
        {},
        1,
        NOW,
        statuses.reconciled(True, "Reconciled", "ok"),
        statuses.group_fields(fields, NOW),
    )
    assert patch["depthTime"] == "2025-03-01T12:00:00Z"
    assert validate(status_schema("ConsumerGroup"), patch) == []


def test_long_messages_are_cut_to_the_crd_bound() -> None:
    (condition,) = merge_conditions(None, [Condition(READY, False, "X", "m" * 40_000)], 1, NOW)
    assert len(condition["message"]) == 32_768


def brokers(*names: str, missing: str = "") -> list[BrokerInfo]:
    return [
        BrokerInfo(n, "orders", None if n == missing else f"10.0.0.{i}:10911", {})
        for i, n in enumerate(names)
    ]


def operator_run(count: int) -> object:
    body = {"metadata": {"name": "orders", "namespace": "shop"}, "spec": {"brokers": count}}
    return cluster_spec(body, "img")


@pytest.mark.parametrize(
    ("listed", "phase", "ready", "reason"),
    [
        (None, "Pending", False, "NameServerUnreachable"),
        ([], "Pending", False, "NoBrokers"),
        (["orders-broker-0"], "Degraded", False, "BrokersMissing"),
        (["orders-broker-0", "orders-broker-1"], "Running", True, "Running"),
    ],
)
def test_operator_run_cluster_phases(
    listed: list[str] | None, phase: str, ready: bool, reason: str
) -> None:
    spec = operator_run(2)
    observed = cluster_status(spec, None if listed is None else brokers(*listed), "refused")  # type: ignore[arg-type]
    assert (observed.phase, observed.ready, observed.reason) == (phase, ready, reason)
    assert observed.fields["nameServer"] == "orders-namesrv.shop.svc:9876"
    # The BROKERS column: the brokers registered, unknown (left as it was) when unreachable.
    assert observed.fields.get("readyBrokers") == (None if listed is None else len(listed))
    document = {"phase": observed.phase, **observed.fields}
    assert validate(status_schema("BrokerCluster"), document) == []


def test_an_external_cluster_is_running_with_any_broker_and_failed_when_unreachable() -> None:
    body = {"metadata": {"name": "legacy"}, "spec": {"external": {"nameServer": "ns:9876"}}}
    spec = cluster_spec(body, "img")
    running = cluster_status(spec, brokers("a", "b", missing="b"))
    assert (running.phase, running.ready) == ("Running", True)
    # What registered, not the spec's defaulted brokers: 2, which an external cluster ignores.
    assert (spec.brokers, running.fields["readyBrokers"]) == (2, 1)
    assert validate(status_schema("BrokerCluster"), running.fields) == []
    assert running.fields["brokers"][1] == {
        "name": "b",
        "address": "",
        "ready": False,
        "message": "no master registered",
    }
    failed = cluster_status(spec, None, "connection refused")
    assert (failed.phase, failed.reason) == ("Failed", "NameServerUnreachable")
    assert "readyBrokers" not in failed.fields
    assert "connection refused" in failed.message


def test_backoff_doubles_and_is_bounded() -> None:
    config = OperatorConfig(backoff_base_s=2, backoff_max_s=60)
    assert [backoff_delay_s(r, config) for r in range(7)] == [2, 4, 8, 16, 32, 60, 60]
    assert backoff_delay_s(10_000, config) == 60


def test_settings_from_the_environment() -> None:
    config = OperatorConfig.from_env(
        {"RECONSUME_DRIFT_SECONDS": "2.5", "RECONSUME_METRICS_PORT": "", "RECONSUME_PEERING": "p"}
    )
    assert config.drift_interval_s == 2.5
    assert config.metrics_port is None
    assert config.peering_name == "p"
    assert OperatorConfig.from_env({}).drift_interval_s == 60
    with pytest.raises(ValueError, match="drift interval"):
        OperatorConfig.from_env({"RECONSUME_DRIFT_SECONDS": "0"})
