"""Warnings posted once per reason, Kopf's expected-wait log lines at INFO, and when a deletion
whose name servers do not answer may end."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, cast

import kopf
import pytest

from reconsume.topology.resources import Target
from reconsume_operator import events
from reconsume_operator.cluster_handlers import ClusterRef, ever_ready
from reconsume_operator.topology_handlers import deletion_age_s, release_reason


def body(reason: str | None = None, uid: str = "u1") -> kopf.Body:
    status: dict[str, Any] = {}
    if reason is not None:
        status["conditions"] = [{"type": "Ready", "status": "False", "reason": reason}]
    raw = {"metadata": {"uid": uid, "name": "g", "namespace": "ns"}, "status": status}
    return kopf.Body(cast(kopf.RawBody, raw))


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def warning(_: kopf.Body, reason: str, message: str) -> None:
        found.append((reason, message))

    monkeypatch.setattr(events, "warning", warning)
    return found


def test_a_reason_is_posted_once_until_it_changes(posted: list[tuple[str, str]]) -> None:
    warnings = events.Warnings()
    for attempt in range(5):
        warnings.post(body(), "NameServerUnreachable", f"attempt {attempt}")
    assert posted == [("NameServerUnreachable", "attempt 0")]
    warnings.post(body(), "DeletionRefused", "dead letters kept")
    warnings.post(body(), "NameServerUnreachable", "again")
    assert [reason for reason, _ in posted] == [
        "NameServerUnreachable",
        "DeletionRefused",
        "NameServerUnreachable",
    ]


def test_after_a_restart_the_status_stands_for_what_was_posted(
    posted: list[tuple[str, str]],
) -> None:
    warnings = events.Warnings()
    assert not warnings.post(body("NameServerUnreachable"), "NameServerUnreachable", "m")
    assert posted == []
    assert warnings.post(body("NameServerUnreachable", uid="u2"), "ChildrenFailed", "m")


def test_recovery_makes_a_later_failure_new(posted: list[tuple[str, str]]) -> None:
    warnings = events.Warnings()
    warnings.post(body(), "NoBrokers", "m")
    assert warnings.settled(body(), "Running")  # a change: a Normal event is due
    assert not warnings.settled(body(), "Running")
    warnings.post(body(), "NoBrokers", "m")
    assert len(posted) == 2


def test_kopf_temporary_failures_are_logged_at_info() -> None:
    waits = events.ExpectedWaits()
    record = logging.LogRecord(
        "kopf.objects", logging.ERROR, "x", 1, "Handler 'delete' failed temporarily: x", (), None
    )
    assert waits.filter(record)
    assert (record.levelno, record.levelname) == (logging.INFO, "INFO")
    crash = logging.LogRecord(
        "kopf.objects",
        logging.ERROR,
        "x",
        1,
        "Handler 'delete' failed with an exception.",
        (),
        None,
    )
    waits.filter(crash)
    assert crash.levelno == logging.ERROR


def ref(*, ever_ready: bool) -> ClusterRef:
    return ClusterRef(Target("127.0.0.1:1", None), ever_ready, deleting=False, external=True)


def test_a_deletion_waits_only_for_a_cluster_that_was_ready() -> None:
    assert "never became Ready" in str(
        release_reason(ref(ever_ready=False), forced=False, waited_s=0, timeout_s=600)
    )
    assert release_reason(ref(ever_ready=True), forced=False, waited_s=599, timeout_s=600) is None
    assert "600 s" in str(
        release_reason(ref(ever_ready=True), forced=False, waited_s=600, timeout_s=600)
    )
    assert "force-delete" in str(
        release_reason(ref(ever_ready=True), forced=True, waited_s=0, timeout_s=600)
    )


def test_ever_ready_reads_the_first_ready_time_or_the_ready_condition() -> None:
    assert not ever_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert ever_ready({"status": {"firstReadyTime": "2026-11-25T10:00:00Z"}})
    assert ever_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def test_deletion_age() -> None:
    now = datetime(2026, 11, 25, 10, 1, 30, tzinfo=UTC)
    meta = {"metadata": {"deletionTimestamp": "2026-11-25T10:00:00Z"}}
    assert deletion_age_s(meta, now) == 90
    assert deletion_age_s({"metadata": {}}, now) == 0
    assert deletion_age_s({"metadata": {"deletionTimestamp": "garbage"}}, now) == 0
