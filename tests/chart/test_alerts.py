"""The chart's Prometheus alerts (``charts/reconsume/files/prometheus-rules.yaml``).

promtool checks the rule file and runs its unit tests (``alerts_test.yaml``: for every alert,
series that make it fire and series that keep it silent). Without promtool these fail in CI
and skip elsewhere (``make chart-deps`` installs Debian's prometheus, which brings it). The
other tests need nothing: every alert carries a severity, a summary, a description and a
runbook URL whose anchor is a heading of ``docs/runbooks.md``; the unit tests cover every
alert both ways; and the rules read only metrics the broker and the operator export.
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

from ..compat.conftest import missing

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "reconsume" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")
RUNBOOKS = REPO / "docs" / "runbooks.md"
RUNBOOK_URL = "https://github.com/reconsume/reconsume/blob/main/docs/runbooks.md#"
SEVERITIES = {"warning", "critical"}
METRIC_SOURCES = [
    REPO / "broker_image" / "reconsume" / "broker" / "metrics.py",
    REPO / "broker_image" / "reconsume" / "broker" / "retry_metrics.py",
    REPO / "operator" / "reconsume_operator" / "metrics.py",
]
PROMETHEUS_METRICS = {"up"}
"""Series Prometheus itself writes for every target."""


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing(
            "promtool is not installed (Debian: apt-get install prometheus; or `make chart-deps`)"
        )
    return path


def run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output}"
    return output


def test_promtool_check_rules(promtool: str) -> None:
    output = run(promtool, "check", "rules", str(RULES))
    assert f"SUCCESS: {len(alerts())} rules found" in output, output


def test_promtool_test_rules(promtool: str) -> None:
    output = run(promtool, "test", "rules", str(UNIT_TESTS))
    assert "SUCCESS" in output, output


def alerts() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def test_alert_names_are_unique() -> None:
    names = Counter(rule["alert"] for rule in alerts())
    assert names, "no alerts"
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: str(rule["alert"]))
def test_every_alert_has_severity_summary_description_and_runbook(rule: dict[str, Any]) -> None:
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
    assert document["rule_files"] == [str(Path("..", "..", RULES.relative_to(REPO)))]
    firing: set[str] = set()
    silent: set[str] = set()
    for test in document["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {rule["alert"] for rule in alerts()}
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
    ):
        assert expected in names


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: str(rule["alert"]))
def test_alerts_read_only_exported_metrics(rule: dict[str, Any]) -> None:
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
