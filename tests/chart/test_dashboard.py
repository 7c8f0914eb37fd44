"""The Grafana dashboard the chart ships (``charts/reconsume/dashboards/reconsume.json``, uid
``reconsume``), and the ConfigMap ``grafanaDashboard.enabled`` renders for Grafana's dashboard
sidecar.

The chart renders no dashboard by default, and with the value one labelled ConfigMap holding
the file unchanged. Every query of the dashboard (the panels' targets and the template
variables' ``label_values`` selectors), with the template variables replaced, passes
``promtool check rules`` as a recording rule; every metric a query reads is one the broker or
the operator exports, as their registries describe it at scrape time (not a list kept here);
every alert of the chart's rules has a panel linking to its runbook that shows what the
alert's expression reads, and its section of ``docs/runbooks.md`` links back to that panel.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.registry import CollectorRegistry

import reconsume_operator.main  # noqa: F401  (imports every module defining operator metrics)
from reconsume.access.guard import AclGuard
from reconsume.broker.acl_resources import BROKER_RULES
from reconsume.broker.context import BrokerContext
from reconsume.broker.health import Readiness
from reconsume.broker.metrics import broker_registry
from reconsume.broker.roles import MasterRole, ReplicaRole, Role
from reconsume.broker.settings import BrokerSettings
from reconsume.engine.schedule import ScheduleService
from reconsume.engine.schedule_state import ScheduleSettings
from reconsume.engine.timer import TimerService
from reconsume.message.address import HostAddress
from reconsume.store import MessageStore, StoreSettings
from reconsume.wire.h2.stats import TransportStats
from reconsume.wire.tls import TlsMode, TlsServerConfig
from reconsume.wire.tls_server import TlsListener

from .helm import CHART, MONITORING_APIS, NAMESPACE, REPO, Helm, HelmError, by_kind, one

DASHBOARD = CHART / "dashboards" / "reconsume.json"
CONFIG_MAP_KEY = "reconsume.json"
RUNBOOKS = REPO / "docs" / "runbooks.md"
README = CHART / "README.md"
SIDECAR_LABEL = "grafana_dashboard"
FOLDER_ANNOTATION = "grafana_folder"
ENABLED = "grafanaDashboard.enabled=true"

VARIABLES = {
    "__rate_interval": "5m",
    "__interval": "1m",
    "__range": "1h",
    "datasource": "prometheus",
    "namespace": "shop",
    "cluster": "orders",
    "group": "GID_orders",
}
"""What each template variable (Grafana's built-in ones and the dashboard's) stands for in the
queries promtool checks: a concrete value of the kind Grafana substitutes."""
DASHBOARD_VARIABLES = {"datasource", "namespace", "cluster", "group"}
VARIABLE_LABELS = {"namespace": "namespace", "cluster": "reconsume_cluster", "group": "group"}
"""The query variables and the label each lists (``label_values(<selector>, <label>)``)."""
PROMETHEUS_SERIES = {"up"}
"""Series Prometheus itself writes for every target."""
ACL_FILE = """
[[accounts]]
access_key = "cluster-admin"
secret_key = "admin-secret-1"
admin = true
"""
SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}
"""The sample names of a metric family of each type, as the exposition format writes them."""
PROMQL_KEYWORDS = {
    "and",
    "or",
    "unless",
    "offset",
    "bool",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)")
LABEL_VALUES = re.compile(r"^\s*label_values\((.+),\s*(\w+)\s*\)\s*$", re.DOTALL)
PANEL_LINK = re.compile(r"/d/(?P<uid>[\w-]+)/(?P<slug>[\w-]+)\?viewPanel=(?P<id>\d+)")


# ------------------------------------------------------------------ the dashboard
def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return dashboard


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_dashboard()


def all_panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows included, and the panels a collapsed row holds."""
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def query_panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in all_panels(dashboard) if panel["type"] != "row"]


def query_variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [v for v in dashboard["templating"]["list"] if v["type"] == "query"]


def variable_query(variable: Mapping[str, Any]) -> str:
    query = variable["query"]
    text = query["query"] if isinstance(query, dict) else query
    assert isinstance(text, str)
    return text


def label_values(variable: Mapping[str, Any]) -> tuple[str, str]:
    """The selector and the label of a ``label_values(<selector>, <label>)`` variable."""
    match = LABEL_VALUES.match(variable_query(variable))
    assert match, f"variable {variable['name']}: not label_values(<selector>, <label>)"
    return match.group(1), match.group(2)


def queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable's selector."""
    found = [
        (f"panel {panel['id']} ({panel['title']}) target {target['refId']}", target["expr"])
        for panel in query_panels(dashboard)
        for target in panel["targets"]
    ]
    found += [
        (f"variable {variable['name']}", label_values(variable)[0])
        for variable in query_variables(dashboard)
    ]
    return found


def substitute(expr: str) -> str:
    """``expr`` with each template variable (``$name``, ``${name}``, ``${name:format}``)
    replaced by its value in :data:`VARIABLES`; an unknown variable is an error."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in VARIABLES:
            raise KeyError(f"unknown template variable ${name} in {expr!r}")
        return VARIABLES[name]

    return VARIABLE.sub(value, expr)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: every identifier that is not a function
    called, a keyword, or inside a string, a label matcher, a range or a grouping clause."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names: set[str] = set()
    for match in re.finditer(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        name, call = match.groups()
        if call is None and name.lower() not in PROMQL_KEYWORDS:
            names.add(name)
    return names


def panel_metrics(panel: Mapping[str, Any]) -> set[str]:
    return {name for target in panel["targets"] for name in metric_names(target["expr"])}


def unknown_metrics(dashboard: Mapping[str, Any], exported: frozenset[str]) -> dict[str, set[str]]:
    """Per query, the metric names it reads that nothing exports."""
    found: dict[str, set[str]] = {}
    for where, expr in queries(dashboard):
        unknown = metric_names(expr) - exported - PROMETHEUS_SERIES
        if unknown:
            found[where] = unknown
    return found


# ------------------------------------------------------------------ what the code exports
class _Source:
    """What a broker's collector reads, for a broker whose store is open, in ``role``, with
    access control and TLS on (each exports its series only then)."""

    def __init__(
        self, context: BrokerContext, role: Role, guard: AclGuard, tls: TlsListener
    ) -> None:
        self.context = context
        self.role = role
        self.guard = guard
        self.tls = tls

    def current_role(self) -> Role:
        return self.role

    def failovers(self) -> int:
        return 0

    def acl_guard(self) -> AclGuard:
        return self.guard

    def tls_listener(self) -> TlsListener:
        return self.tls

    def grpc_stats(self) -> TransportStats:
        stats = TransportStats(open_connections=2, accepted_connections=3)
        stats.calls["SendMessage", 0] = 10
        stats.calls["ReceiveMessage", 1] = 1
        stats.connection_errors[1] = 1
        return stats

    def current_context(self) -> BrokerContext | None:
        return self.context

    def connection_count(self) -> int:
        return 0

    def registration_results(self) -> Mapping[str, Sequence[int]]:
        return {}

    def readiness(self) -> Readiness:
        return Readiness(True, "ok")


def sample_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name the registry's families can expose, samples or not yet."""
    names: set[str] = set()
    for family in registry.collect():
        names.update(family.name + suffix for suffix in SAMPLE_SUFFIXES[family.type])
        names.update(sample.name for sample in family.samples)
    return names


@cache
def exported_metrics() -> frozenset[str]:
    """The sample names ``/metrics`` of a broker (its own registry, over an open store with the
    delay-level schedule and the timer, access control and TLS, as a running broker has them)
    and of the operator
    (prometheus-client's default registry, which it serves) can expose."""
    with tempfile.TemporaryDirectory(prefix="reconsume-dashboard-") as directory:
        store_settings = StoreSettings(
            commit_log_segment_bytes=1 << 20, max_message_bytes=4096, preallocate=False
        )
        settings = BrokerSettings(store_dir=directory, store=store_settings)
        host = HostAddress.parse("127.0.0.1:10911")
        with MessageStore(
            Path(directory), store_settings, store_host=host, background=False
        ) as store:
            context = BrokerContext(settings, store, host, lambda: None)
            context.schedule = ScheduleService(store, context.delays, context.append)
            context.timer = TimerService(store, context.append, ScheduleSettings())
            # a master and a replica: each exports the replication series of its role
            master = MasterRole(context, settings, context.delays)
            replica = ReplicaRole(context, "broker-a-1", "127.0.0.1:10912")
            acl_file = Path(directory) / "acl.toml"
            acl_file.write_text(ACL_FILE, encoding="utf-8")
            guard = AclGuard(acl_file, BROKER_RULES, "broker broker-a")
            tls_config = TlsServerConfig(TlsMode.ENFORCING, "tls.crt", "tls.key")
            tls = TlsListener(tls_config, asyncio.Protocol, "broker broker-a")  # not started
            broker = set()
            for role in (master, replica):
                source = _Source(context, role, guard, tls)
                registry = broker_registry(source, max_queue_series=10)
                broker |= sample_names(registry)
    # The operator serves prometheus-client's default registry; its modules (all imported by
    # its entry point, above) define their metrics there.
    return frozenset(broker | sample_names(REGISTRY))


# ------------------------------------------------------------------ the chart's rules
@pytest.fixture(scope="module")
def alerts(helm: Helm) -> list[dict[str, Any]]:
    """The alerting rules of the PrometheusRule, default values."""
    rules = one(helm.render(api_versions=MONITORING_APIS), "PrometheusRule")["spec"]
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def runbook_links(panel: Mapping[str, Any]) -> set[str]:
    return {link["url"] for link in panel.get("links", []) if "#" in link.get("url", "")}


def alert_panel(dashboard: Mapping[str, Any], alert: Mapping[str, Any]) -> dict[str, Any]:
    url = alert["annotations"]["runbook_url"]
    found = [panel for panel in query_panels(dashboard) if url in runbook_links(panel)]
    assert len(found) == 1, f"{alert['alert']}: {len(found)} panels link to {url}"
    return found[0]


def runbook_section(name: str) -> str:
    """The text of ``docs/runbooks.md`` under the heading ``## <name>``, up to the next one."""
    text = RUNBOOKS.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(name)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/runbooks.md has no section ## {name}"
    return match.group(1)


# ------------------------------------------------------------------ the ConfigMap
def dashboard_config_maps(
    objects: Sequence[dict[str, Any]], label: str = SIDECAR_LABEL
) -> list[dict[str, Any]]:
    return [
        obj for obj in by_kind(objects, "ConfigMap") if label in obj["metadata"].get("labels", {})
    ]


def test_no_dashboard_by_default(helm: Helm) -> None:
    for apis in ((), MONITORING_APIS):
        objects = helm.render(api_versions=apis)
        assert dashboard_config_maps(objects) == []
        names = [obj["metadata"]["name"] for obj in by_kind(objects, "ConfigMap")]
        assert not [name for name in names if name.endswith("-dashboard")]


def test_enabled_renders_one_labelled_config_map_holding_the_file(helm: Helm) -> None:
    objects = helm.render(sets=[ENABLED])
    (config_map,) = dashboard_config_maps(objects)
    metadata = config_map["metadata"]
    assert metadata["name"] == "reconsume-dashboard"
    assert metadata["namespace"] == NAMESPACE
    assert metadata["labels"][SIDECAR_LABEL] == "1"
    assert metadata["labels"]["app.kubernetes.io/instance"] == "reconsume"
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert FOLDER_ANNOTATION not in (metadata.get("annotations") or {})
    assert list(config_map["data"]) == [CONFIG_MAP_KEY]
    text = config_map["data"][CONFIG_MAP_KEY]
    assert text == DASHBOARD.read_text(encoding="utf-8")
    parsed = json.loads(text)
    assert parsed["uid"] == "reconsume"
    assert parsed == load_dashboard()
    # Nothing else changes with the value.
    others = [obj for obj in objects if obj is not config_map]
    assert others == helm.render()


def test_label_folder_and_namespace_are_values(helm: Helm) -> None:
    objects = helm.render(
        sets=[
            ENABLED,
            "grafanaDashboard.label=dashboards.example.com/load",
            "grafanaDashboard.labelValue=yes",
            "grafanaDashboard.folder=Messaging",
            "grafanaDashboard.namespace=monitoring",
        ]
    )
    assert dashboard_config_maps(objects) == []
    (config_map,) = dashboard_config_maps(objects, "dashboards.example.com/load")
    metadata = config_map["metadata"]
    assert metadata["labels"]["dashboards.example.com/load"] == "yes"
    assert metadata["annotations"] == {FOLDER_ANNOTATION: "Messaging"}
    assert metadata["namespace"] == "monitoring"
    assert json.loads(config_map["data"][CONFIG_MAP_KEY]) == load_dashboard()


def test_a_numeric_label_value_is_a_string(helm: Helm) -> None:
    (config_map,) = dashboard_config_maps(
        helm.render(sets=[ENABLED, "grafanaDashboard.labelValue=2"])
    )
    assert config_map["metadata"]["labels"][SIDECAR_LABEL] == "2"


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        (
            "grafanaDashboard.enabled=yes",
            "at '/grafanaDashboard/enabled': got string, want boolean",
        ),
        ("grafanaDashboard.label=not a label", "at '/grafanaDashboard/label': 'not a label' does"),
        ("grafanaDashboard.labelValue=-x-", "at '/grafanaDashboard/labelValue': '-x-' does not"),
        ("grafanaDashboard.namespace=Monitoring", "at '/grafanaDashboard/namespace': 'Monitoring'"),
        ("grafanaDashboard.sidecar=true", "additional properties 'sidecar' not allowed"),
    ],
)
def test_invalid_dashboard_values_are_refused(helm: Helm, assignment: str, expected: str) -> None:
    with pytest.raises(HelmError) as refused:
        helm.render(sets=[ENABLED, assignment])
    message = str(refused.value)
    assert "values don't meet the specifications of the schema" in message, message
    assert expected in message, message


def test_helm_lint_with_the_dashboard(helm: Helm) -> None:
    output = helm.run("lint", "--strict", str(CHART), "--set", ENABLED)
    assert "0 chart(s) failed" in output, output


# ------------------------------------------------------------------ its structure
def test_dashboard_identity_and_variables(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "reconsume"
    assert dashboard["title"] == "reconsume"
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == DASHBOARD_VARIABLES
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    for name, label in VARIABLE_LABELS.items():
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert label_values(variables[name])[1] == label


def test_every_panel_has_a_unique_id_a_title_and_a_place(dashboard: dict[str, Any]) -> None:
    panels = all_panels(dashboard)
    ids = Counter(panel.get("id") for panel in panels)
    assert all(isinstance(panel_id, int) and panel_id > 0 for panel_id in ids), ids
    assert [panel_id for panel_id, count in ids.items() if count > 1] == []
    titles = Counter(str(panel.get("title") or "").strip() for panel in panels)
    assert "" not in titles
    assert [title for title, count in titles.items() if count > 1] == []
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        place = panel["gridPos"]
        assert set(place) == {"h", "w", "x", "y"}, panel["title"]
        assert place["x"] + place["w"] <= 24, panel["title"]
        for x in range(place["x"], place["x"] + place["w"]):
            for y in range(place["y"], place["y"] + place["h"]):
                other = cells.setdefault((x, y), panel["title"])
                assert other == panel["title"], f"{panel['title']} overlaps {other}"


def test_every_query_reads_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    for panel in query_panels(dashboard):
        assert panel["targets"], f"panel {panel['id']} has no query"
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in [panel, *panel["targets"]]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_variable_a_query_uses_exists(dashboard: dict[str, Any]) -> None:
    for where, expr in queries(dashboard):
        used = {a or b for a, b in VARIABLE.findall(expr)}
        assert used - DASHBOARD_VARIABLES - {n for n in VARIABLES if n.startswith("__")} == set(), (
            where
        )


# ------------------------------------------------------------------ promtool
@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("rate(x_total[$__rate_interval])", "rate(x_total[5m])"),
        ("rate(x_total[${__rate_interval}])", "rate(x_total[5m])"),
        ("increase(x_total[$__interval])", "increase(x_total[1m])"),
        ('x{namespace=~"$namespace", reconsume_cluster=~"${cluster}"}', None),
        ('x{group=~"${group:regex}"}', 'x{group=~"GID_orders"}'),
        ("$datasource", "prometheus"),
    ],
)
def test_substitute(expr: str, expected: str | None) -> None:
    result = substitute(expr)
    assert "$" not in result
    if expected is not None:
        assert result == expected
    else:
        assert result == 'x{namespace=~"shop", reconsume_cluster=~"orders"}'


def test_substitute_refuses_an_unknown_variable() -> None:
    with pytest.raises(KeyError, match=r"\$pod"):
        substitute('x{pod="$pod"}')


def test_every_query_parses_with_promtool(
    dashboard: dict[str, Any], promtool: str, tmp_path: Path
) -> None:
    """Each query, variables replaced, as a recording rule: ``promtool check rules`` parses
    every expression."""
    rules = [
        {"record": f"dashboard:query_{index}", "expr": substitute(expr)}
        for index, (_, expr) in enumerate(queries(dashboard))
    ]
    for rule in rules:
        assert "$" not in rule["expr"], rule["expr"]
    path = tmp_path / "dashboard.rules.yaml"
    document = {"groups": [{"name": "reconsume-dashboard", "rules": rules}]}
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "check", "rules", path.name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"SUCCESS: {len(rules)} rules found" in output, output


def test_promtool_refuses_a_broken_query(promtool: str, tmp_path: Path) -> None:
    """The check above can fail: a query that does not parse is refused."""
    path = tmp_path / "broken.rules.yaml"
    broken = {
        "record": "dashboard:broken",
        "expr": substitute("sum by (group (rate(x[$__interval]))"),
    }
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [broken]}]}))
    done = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0, done.stdout


# ------------------------------------------------------------------ exported metrics
@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'sum by (namespace, group) (rate(reconsume_send_back_total{group=~"$group"}[5m]))',
            {"reconsume_send_back_total"},
        ),
        (
            "histogram_quantile(0.99, sum by (pod, le) (rate(a_seconds_bucket[$__rate_interval])))",
            {"a_seconds_bucket"},
        ),
        (
            'a / on (group) group_left (topic) b{topic=~"%RETRY%.+"} offset 1h > 1e3 and bool c',
            {"a", "b", "c"},
        ),
        ('label_replace(up, "dst", "$1", "instance", "(.*):.*") == Inf', {"up"}),
        ("sum without (le) (x) unless y @ start()", {"x", "y"}),
        ("max_over_time(x[1h:5m]) or vector(0)", {"x"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_exported_metrics_come_from_the_registries() -> None:
    """The broker's and the operator's registries describe what the chart's alerts read and the
    samples of each family type."""
    names = exported_metrics()
    assert {"reconsume_build_info", "reconsume_retry_depth", "reconsume_send_back_total"} <= names
    assert {
        "reconsume_schedule_lateness_seconds_bucket",
        "reconsume_timer_lateness_seconds_count",
        "reconsume_operator_reconcile_total",
        "reconsume_operator_reconcile_seconds_bucket",
    } <= names
    assert "reconsume_send_back" not in names  # a counter's samples end in _total
    assert "reconsume_schedule_lateness_seconds" not in names  # a histogram's have suffixes


def test_the_alerts_read_exported_metrics(alerts: list[dict[str, Any]]) -> None:
    """A cross-check of the extraction: what the chart's alerts read is exported."""
    assert alerts
    for alert in alerts:
        read = metric_names(alert["expr"])
        assert read, alert["alert"]
        assert read - exported_metrics() - PROMETHEUS_SERIES == set(), alert["alert"]


def test_every_query_reads_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    for where, expr in queries(dashboard):
        assert "__name__" not in expr, f"{where}: select metrics by name, not by __name__"
        assert metric_names(expr), f"{where} reads no metric: {expr}"
    assert unknown_metrics(dashboard, exported_metrics()) == {}


def test_an_unknown_metric_is_caught(dashboard: dict[str, Any]) -> None:
    """The check above fails on a metric nothing exports, in a panel or a variable."""
    changed = copy.deepcopy(dashboard)
    panel = query_panels(changed)[0]
    panel["targets"].append(
        {
            "refId": "Z",
            "expr": 'max by (group) (reconsume_retry_age_seconds{namespace=~"$namespace"})',
        }
    )
    group = next(v for v in query_variables(changed) if v["name"] == "group")
    group["query"] = "label_values(reconsume_consumer_lag{}, group)"
    unknown = unknown_metrics(changed, exported_metrics())
    assert unknown == {
        f"panel {panel['id']} ({panel['title']}) target Z": {"reconsume_retry_age_seconds"},
        "variable group": {"reconsume_consumer_lag"},
    }


# ------------------------------------------------------------------ alerts and runbooks
def test_every_alert_has_a_panel_showing_what_it_reads(
    dashboard: dict[str, Any], alerts: list[dict[str, Any]]
) -> None:
    """The panel linking to an alert's runbook reads every metric of its expression."""
    for alert in alerts:
        panel = alert_panel(dashboard, alert)
        missing = metric_names(alert["expr"]) - panel_metrics(panel)
        assert missing == set(), f"{alert['alert']}: panel {panel['id']} does not read {missing}"


def test_every_runbook_link_of_a_panel_is_an_alert(
    dashboard: dict[str, Any], alerts: list[dict[str, Any]]
) -> None:
    urls = {alert["annotations"]["runbook_url"] for alert in alerts}
    for panel in query_panels(dashboard):
        assert runbook_links(panel) - urls == set(), panel["title"]


def test_each_runbook_links_to_its_alert_panel(
    dashboard: dict[str, Any], alerts: list[dict[str, Any]]
) -> None:
    """Each alert's section of docs/runbooks.md names its panel's title and links to it
    (``/d/<uid>/<slug>?viewPanel=<id>``, relative to the Grafana URL)."""
    slug = re.sub(r"[^a-z0-9]+", "-", dashboard["title"].lower()).strip("-")
    ids = {panel["id"]: panel for panel in all_panels(dashboard)}
    for alert in alerts:
        section = runbook_section(alert["alert"])
        links = list(PANEL_LINK.finditer(section))
        assert links, f"the runbook of {alert['alert']} does not link to a dashboard panel"
        expected = alert_panel(dashboard, alert)
        for link in links:
            assert (link["uid"], link["slug"]) == (dashboard["uid"], slug), link.group(0)
            assert int(link["id"]) in ids, f"{alert['alert']}: no panel {link['id']}"
        assert {int(link["id"]) for link in links} == {expected["id"]}, alert["alert"]
        assert expected["title"] in section, f"{alert['alert']}: the panel's title"


def test_the_docs_say_how_to_enable_the_dashboard() -> None:
    for path in (RUNBOOKS, README):
        text = path.read_text(encoding="utf-8")
        assert f"--set {ENABLED}" in text, path
        assert SIDECAR_LABEL in text, path
