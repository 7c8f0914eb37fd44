"""The chart's Prometheus alerts (``charts/reconsume/templates/_alerts.tpl``), as helm
renders them with the default values.

promtool checks the rendered rules and runs their unit tests (``alerts_test.yaml``: for every
alert, series that make it fire and series that keep it silent). Without helm or promtool these
fail in CI and skip elsewhere (``make chart-deps`` builds helm and installs Debian's
prometheus, which brings promtool). Every alert carries a severity, a summary, a description
and a runbook URL whose anchor is a heading of ``docs/runbooks.md``; the unit tests cover every
alert both ways; the rules read only metrics the broker and the operator export; and the
thresholds are values of the chart.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from .helm import MONITORING_APIS, REPO, Helm, one

UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")
RULES_NAME = "reconsume.rules.yaml"
"""The rule file ``alerts_test.yaml`` names: the rendered rules, written beside a copy of it."""
RUNBOOKS = REPO / "docs" / "runbooks.md"
RUNBOOK_URL = "https://github.com/reconsume/reconsume/blob/main/docs/runbooks.md#"
SEVERITIES = {"warning", "critical"}
ALERTS = [
    "ReconsumeDeadLettersGrowing",
    "ReconsumeDeadLetterBacklog",
    "ReconsumeRetryStorm",
    "ReconsumeScheduleLag",
    "ReconsumeScheduleStalled",
    "ReconsumeBrokerDown",
    "ReconsumeBrokerNoInSyncReplica",
    "ReconsumeBrokerReplicaLagging",
    "ReconsumeReconcileFailures",
    "ReconsumeDeadLetterJobFailed",
    "ReconsumeRequestsRefused",
    "ReconsumeAclReloadFailing",
    "ReconsumeTlsCertificateReloadFailing",
]
METRIC_SOURCES = [
    REPO / "broker_image" / "reconsume" / "broker" / "metrics.py",
    REPO / "broker_image" / "reconsume" / "broker" / "retry_metrics.py",
    REPO / "broker_image" / "reconsume" / "broker" / "replication_metrics.py",
    REPO / "broker_image" / "reconsume" / "broker" / "acl_metrics.py",
    REPO / "broker_image" / "reconsume" / "broker" / "tls_metrics.py",
    REPO / "operator" / "reconsume_operator" / "metrics.py",
]
PROMETHEUS_METRICS = {"up"}
"""Series Prometheus itself writes for every target."""


def rendered_rules(helm: Helm, *values: Path) -> dict[str, Any]:
    """The PrometheusRule's spec (a Prometheus rule file's content)."""
    objects = helm.render(values=values, api_versions=MONITORING_APIS)
    spec: dict[str, Any] = one(objects, "PrometheusRule")["spec"]
    return spec


@pytest.fixture(scope="module")
def rules(helm: Helm) -> dict[str, Any]:
    return rendered_rules(helm)


@pytest.fixture(scope="module")
def rules_dir(rules: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rendered rules and a copy of the unit tests, side by side."""
    directory = tmp_path_factory.mktemp("alerts")
    (directory / RULES_NAME).write_text(yaml.safe_dump(rules, sort_keys=False))
    shutil.copy(UNIT_TESTS, directory / UNIT_TESTS.name)
    return directory


def run(*command: str, cwd: Path | None = None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd=cwd)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output}"
    return output


def alerts_of(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def alert(rules: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [rule for rule in alerts_of(rules) if rule["alert"] == name]
    return found


def test_promtool_check_rules(promtool: str, rules_dir: Path) -> None:
    output = run(promtool, "check", "rules", RULES_NAME, cwd=rules_dir)
    assert f"SUCCESS: {len(ALERTS)} rules found" in output, output


def test_promtool_test_rules(promtool: str, rules_dir: Path) -> None:
    output = run(promtool, "test", "rules", UNIT_TESTS.name, cwd=rules_dir)
    assert "SUCCESS" in output, output


def test_the_alerts_are_the_documented_ones(rules: dict[str, Any]) -> None:
    assert [rule["alert"] for rule in alerts_of(rules)] == ALERTS


def test_alert_names_are_unique(rules: dict[str, Any]) -> None:
    names = Counter(rule["alert"] for rule in alerts_of(rules))
    assert names, "no alerts"
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize("name", ALERTS)
def test_every_alert_has_severity_summary_description_and_runbook(
    rules: dict[str, Any], name: str
) -> None:
    rule = alert(rules, name)
    assert rule.get("labels", {}).get("severity") in SEVERITIES
    annotations = rule.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        assert str(annotations.get(key) or "").strip(), f"{rule['alert']} has no {key}"
    url = annotations["runbook_url"]
    assert url.startswith(RUNBOOK_URL), url
    anchor = url.removeprefix(RUNBOOK_URL)
    assert anchor == github_anchor(rule["alert"]), "the section's heading is the alert's name"
    assert anchor in runbook_anchors(), f"docs/runbooks.md has no heading with anchor #{anchor}"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped (letters,
    digits, ``_``, ``-`` and spaces kept), each space a ``-``."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def runbook_anchors() -> set[str]:
    """The anchors of the headings of docs/runbooks.md (outside code blocks); a repeated
    heading gets ``-1``, ``-2`` ... as on GitHub."""
    anchors: set[str] = set()
    seen: Counter[str] = Counter()
    fenced = False
    for line in RUNBOOKS.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or match is None:
            continue
        anchor = github_anchor(match.group(1))
        anchors.add(anchor if not seen[anchor] else f"{anchor}-{seen[anchor]}")
        seen[anchor] += 1
    return anchors


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("ReconsumeBrokerDown", "reconsumebrokerdown"),
        ("Retry storm (send-backs / consumption)", "retry-storm-send-backs--consumption"),
        ("What `up == 0` means", "what-up--0-means"),
        ("Labels: job and reconsume_cluster", "labels-job-and-reconsume_cluster"),
    ],
)
def test_github_anchor(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_unit_tests_make_every_alert_fire_and_stay_silent() -> None:
    document = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))
    assert document["rule_files"] == [RULES_NAME]
    firing: set[str] = set()
    silent: set[str] = set()
    for test in document["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = set(ALERTS)
    assert names - firing == set(), "alerts no unit test makes fire"
    assert names - silent == set(), "alerts no unit test expects silent"
    assert (firing | silent) - names == set(), "unit tests of alerts the rules do not have"


@cache
def exported_metrics() -> frozenset[str]:
    """The sample names the broker's and the operator's collectors expose, read from their
    sources: counters get ``_total``, histograms ``_bucket``, ``_sum`` and ``_count``."""
    kinds = {
        "_counter": "counter",
        "CounterMetricFamily": "counter",
        "Counter": "counter",
        "_gauge": "gauge",
        "GaugeMetricFamily": "gauge",
        "Gauge": "gauge",
        "HistogramMetricFamily": "histogram",
        "Histogram": "histogram",
    }
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    names: set[str] = set()
    for source in METRIC_SOURCES:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        prefix = next(
            (
                str(node.value.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["PREFIX"]
                and isinstance(node.value, ast.Constant)
            ),
            "",
        )
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            kind = kinds.get(node.func.id)
            if kind is None:
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                # _counter/_gauge add the prefix themselves; the classes take full names.
                name = prefix + first.value if node.func.id.startswith("_") else first.value
            elif (
                isinstance(first, ast.BinOp)
                and isinstance(first.op, ast.Add)
                and isinstance(first.left, ast.Name)
                and first.left.id == "PREFIX"
                and isinstance(first.right, ast.Constant)
            ):
                name = prefix + str(first.right.value)
            else:
                continue
            names.update(name + suffix for suffix in suffixes[kind])
    return frozenset(names)


def test_exported_metrics_are_read_from_the_sources() -> None:
    names = exported_metrics()
    for expected in (
        "reconsume_messages_out_total",
        "reconsume_dead_letter_depth",
        "reconsume_schedule_lateness_seconds_bucket",
        "reconsume_operator_reconcile_total",
        "reconsume_operator_reconcile_seconds_count",
        "reconsume_replica_lag_messages",
        "reconsume_failovers_total",
    ):
        assert expected in names


@pytest.mark.parametrize("name", ALERTS)
def test_alerts_read_only_exported_metrics(rules: dict[str, Any], name: str) -> None:
    rule = alert(rules, name)
    # Label matchers and grouping clauses name labels, not metrics.
    expr = re.sub(r"\{[^}]*\}", "", rule["expr"])
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    used = {
        token
        for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr)
        if token.startswith("reconsume_") or token in PROMETHEUS_METRICS
    }
    assert used, rule["expr"]
    assert used - exported_metrics() - PROMETHEUS_METRICS == set()


def test_runbooks_name_only_exported_metrics() -> None:
    exported = exported_metrics()
    named = set(re.findall(r"\breconsume_[a-z_]*[a-z]\b", RUNBOOKS.read_text(encoding="utf-8")))
    named -= {"reconsume_cluster"}  # the scrape's BrokerCluster label
    unknown = {name for name in named if name not in exported and f"{name}_bucket" not in exported}
    assert named
    assert unknown == set()


def test_thresholds_are_values(helm: Helm, promtool: str, tmp_path: Path) -> None:
    """tests/chart/values/monitoring.yaml changes thresholds, job labels, the runbook base and
    turns one alert off; the rendered rules follow and still pass promtool."""
    changed = rendered_rules(helm, REPO / "tests" / "chart" / "values" / "monitoring.yaml")
    names = [rule["alert"] for rule in alerts_of(changed)]
    assert names == [name for name in ALERTS if name != "ReconsumeScheduleStalled"]
    backlog = alert(changed, "ReconsumeDeadLetterBacklog")
    assert backlog["expr"].strip().endswith("(reconsume_dead_letter_depth) > 50")
    assert backlog["for"] == "5m"
    assert backlog["labels"]["severity"] == "critical"
    assert "more than 50 for 5m" in backlog["annotations"]["description"]
    storm = alert(changed, "ReconsumeRetryStorm")["expr"]
    assert "[5m]" in storm
    assert "[10m]" not in storm
    assert ") > 0.5\n" in storm
    assert storm.strip().endswith("> 10")
    assert 'up{job="rocketmq-brokers"} == 0' in alert(changed, "ReconsumeBrokerDown")["expr"]
    assert 'job="reconsume-ops"' in alert(changed, "ReconsumeReconcileFailures")["expr"]
    lagging = alert(changed, "ReconsumeBrokerReplicaLagging")
    assert "reconsume_replica_lag_seconds > 120," in lagging["expr"]
    assert "reconsume_replica_lag_messages > 500," in lagging["expr"]
    assert lagging["for"] == "15m"
    description = lagging["annotations"]["description"]
    assert "more than 500 messages or messages older than 120s" in description
    for rule in alerts_of(changed):
        url = rule["annotations"]["runbook_url"]
        assert url == f"https://runbooks.example.com/reconsume.md#{rule['alert'].lower()}"
    (tmp_path / RULES_NAME).write_text(yaml.safe_dump(changed, sort_keys=False))
    output = run(promtool, "check", "rules", RULES_NAME, cwd=tmp_path)
    assert f"SUCCESS: {len(names)} rules found" in output, output


def test_a_group_with_every_alert_off_is_left_out(helm: Helm) -> None:
    objects = helm.render(sets=["alerts.brokerDown.enabled=false"], api_versions=MONITORING_APIS)
    groups = [group["name"] for group in one(objects, "PrometheusRule")["spec"]["groups"]]
    assert "reconsume.brokers" not in groups
    assert "reconsume.operator" in groups
