"""The operator's command line, its handler registration and its metrics."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import kopf
import pytest
from kopf._cogs.structs.references import Resource
from prometheus_client import CollectorRegistry, Counter

from reconsume_operator.config import OperatorConfig
from reconsume_operator.main import liveness_endpoint
from reconsume_operator.metrics import RECONCILES, reconcile_timer, serve_metrics
from reconsume_operator.registration import register

SCRIPT = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60, check=False)


def test_reconsume_operator_help_lists_the_operators_flags() -> None:
    result = run("operator", "--help")
    assert result.returncode == 0, result.stderr
    for flag in ("--namespace", "--all-namespaces", "--metrics-port", "--standalone"):
        assert flag in result.stdout


def test_an_invalid_setting_is_refused_before_anything_runs() -> None:
    result = run("operator", "-n", "shop", "--drift-seconds", "0")
    assert result.returncode == 2
    assert "drift interval must be positive" in result.stderr
    assert run("operator").returncode == 2  # a scope (-n or -A) is required


def test_every_handler_is_registered_in_the_given_registry() -> None:
    registry = kopf.OperatorRegistry()
    register(registry, OperatorConfig(drift_interval_s=2))
    ids = {str(h.id) for h in registry._changing.get_all_handlers()}
    assert {"reconcile-create", "reconcile-update", "reconcile-resume", "delete"} <= ids
    assert {"paused-create", "paused-update", "paused-resume"} <= ids
    assert {"force-delete", "paused-delete"} <= ids
    assert {"cluster-create", "cluster-update", "cluster-resume"} <= ids
    timers = list(registry._spawning.get_all_handlers())
    assert {t.interval for t in timers} == {2}  # type: ignore[union-attr]
    indices = {str(h.id) for h in registry._indexing.get_all_handlers()}
    assert indices == {"broker_clusters", "group_claims", "topic_claims"}


def configured() -> tuple[kopf.OperatorRegistry, kopf.OperatorSettings]:
    """The operator's registry, and the settings as its startup handler leaves them."""
    registry = kopf.OperatorRegistry()
    register(registry, OperatorConfig(standalone=True))
    settings = kopf.OperatorSettings()
    (startup,) = [h for h in registry._activities.get_all_handlers() if h.activity == "startup"]
    startup.fn(settings=settings, logger=logging.getLogger("test"))
    return registry, settings


def test_watches_of_kinds_the_operator_does_not_own_are_filtered_by_the_api_server() -> None:
    """A Kopf handler's label filter drops events after they arrive: the watch of a kind
    the operator only looks at a labelled part of asks the API server for that part."""
    registry, settings = configured()
    filtered = [h for h in registry._watching.get_all_handlers() if h.labels]
    assert {h.selector.any_name for h in filtered if h.selector} == {"jobs", "leases"}
    for handler in filtered:
        selector = handler.selector
        assert selector is not None
        assert selector.group is not None
        assert selector.version is not None
        assert selector.any_name is not None
        resource = Resource(selector.group, selector.version, selector.any_name)
        (server_side,) = settings.watching.label_selectors.collect(resource)
        assert server_side.split(",") == [
            key if value is kopf.PRESENT else f"{key}={value}"
            for key, value in (handler.labels or {}).items()
        ]
    leases = Resource("coordination.k8s.io", "v1", "leases")
    assert settings.watching.label_selectors.collect(leases) == [
        "app.kubernetes.io/component=broker-lease,app.kubernetes.io/managed-by=reconsume-operator"
    ]
    pods = Resource("", "v1", "pods")
    assert settings.watching.label_selectors.collect(pods) == []


def sample(kind: str, result: str) -> float:
    value = RECONCILES.labels(kind, result)._value.get()
    return float(value)


def test_reconciles_are_counted_by_kind_and_result() -> None:
    before_ok, before_error = sample("Unit", "ok"), sample("Unit", "error")
    with reconcile_timer("Unit") as outcome:
        outcome.result = "ok"
    try:
        with reconcile_timer("Unit"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert sample("Unit", "ok") == before_ok + 1
    assert sample("Unit", "error") == before_error + 1


def test_metrics_are_served_over_http_to_both_ip_families_on_one_port() -> None:
    registry = CollectorRegistry()
    Counter("reconsume_operator_probe", "A probe.", registry=registry).inc()
    server, thread, port = serve_metrics(0, registry)
    bodies = []
    try:
        for host in ("127.0.0.1", "[::1]"):
            url = f"http://{host}:{port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                bodies.append(response.read().decode())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert all("reconsume_operator_probe_total 1.0" in body for body in bodies)


@pytest.mark.parametrize(
    ("port", "pod_ip", "endpoint"),
    [
        (8080, "10.244.0.5", "http://0.0.0.0:8080/healthz"),
        (8080, "", "http://0.0.0.0:8080/healthz"),
        (8080, "fd00:10:244::5", "http://[::]:8080/healthz"),
        (None, "10.244.0.5", None),
    ],
)
def test_the_liveness_endpoint_listens_on_the_pods_ip_family(
    port: int | None, pod_ip: str, endpoint: str | None
) -> None:
    assert liveness_endpoint(port, pod_ip) == endpoint
