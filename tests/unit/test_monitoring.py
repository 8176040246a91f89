"""deploy/monitoring agrees with /metrics: every PromQL expression of the PrometheusRule and of
the Grafana dashboard names only series the daemon exports, as its registry collects them (a
renamed metric breaks an alert silently otherwise), and each alert an operator needs is there.

On both sources of the Slurm series (slurmctld's OpenMetrics, slurmrestd): a dashboard query
names series both serve, or its panel says "REST source only" and docs/metrics.md lists those
series as REST-only; an alert has a branch (`or on()`) on each source's series."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.daemon.metrics import DaemonMetrics
from reconciler.slurm_metrics.figures import Family
from reconciler.slurm_metrics.openmetrics import openmetrics_families
from reconciler.slurm_metrics.reader import SOURCE_OPENMETRICS, SOURCE_REST, SlurmView
from tests.unit.test_slurm_metrics import figures
from tests.unit.test_slurm_openmetrics import REST_ONLY, captured

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
REST_ONLY_PANEL = "(REST source only)"
# Words of PromQL that look like names: operators, modifiers and grouping keywords.
_KEYWORDS = frozenset(
    [
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
    ]
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def exported_names(source: str = SOURCE_REST) -> set[str]:
    """Every sample name the daemon's registry serves, with the Slurm reader's families of
    SOURCE present (REST: as after a read of an empty cluster; OpenMetrics: of a captured
    26.05.3 slurmctld)."""
    families: tuple[Family, ...] = (
        tuple(figures().values()) if source == SOURCE_REST else openmetrics_families(captured())
    )
    metrics = DaemonMetrics()
    metrics.watch_slurm(lambda: SlurmView(families, 0.0, 0.1, True, 0, 0.0, source))
    metrics.watch_leader(lambda: True)
    return {s.name for family in metrics.registry.collect() for s in family.samples} | {
        family.name for family in metrics.registry.collect()
    }


def metric_names(expr: str) -> set[str]:
    """The series names an expression selects: not functions or aggregations (a name before
    `(`), label names (inside `{}` and `by (...)`), keywords, durations or Grafana variables."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\$\{?\w+\}?", "", text)  # $__rate_interval, $partition
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    # Grouping and matching clauses go whole, so `sum by (x) (...)` reads as a call of sum.
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = set()
    for match in _NAME.finditer(text):
        word, rest = match.group(), text[match.end() :].lstrip()
        before = text[: match.start()]
        if rest.startswith("(") or word in _KEYWORDS or re.search(r"\d$", before):
            continue
        found.add(word)
    return found


def rule_exprs() -> dict[str, str]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every panel target and query variable."""
    board = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    found = [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        query: Any = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        if match := re.fullmatch(r"label_values\((.*),\s*\w+\)", text):
            found.append((f"${variable['name']}", match.group(1)))
    return found


def dashboard_exprs() -> list[str]:
    return [expr for _, expr in dashboard_queries()]


def branches(expr: str) -> list[str]:
    """The alternatives of an expression's top-level `or on()` (the fallback per source)."""
    parts, depth, start = [], 0, 0
    for found in re.finditer(r"[()]|\bor on\(\)", expr):
        token = found.group()
        depth += {"(": 1, ")": -1}.get(token, 0)
        if token.startswith("or") and depth == 0:
            parts.append(expr[start : found.start()])
            start = found.end()
    return [*parts, expr[start:]]


def test_the_name_reader_finds_names_and_only_names() -> None:
    """The check below can only fail if this reader sees a wrong name."""
    expr = (
        'sum by (partition, reason) (rate(slurm_nope_total{state=~"a|b", x="y z"}[5m] offset 1h))'
        " > 100 and on() absent(up_thing) or vector(0) * $scale"
    )
    assert metric_names(expr) == {"slurm_nope_total", "up_thing"}


@pytest.mark.parametrize("expr", [*rule_exprs().values(), *dashboard_exprs()], ids=lambda e: e[:60])
def test_every_query_names_a_series_the_daemon_exports(expr: str) -> None:
    names = metric_names(expr)
    assert names, f"no metric found in {expr!r}"
    assert names <= exported_names(), f"not exported: {names - exported_names()}"


def test_the_controller_nodes_backlog_and_staleness_alerts_are_there() -> None:
    alerts = rule_exprs()
    assert {"SlurmControllerDown", "SlurmNodesDrained", "SlurmSchedulerBacklog",
            "SlurmMetricsStale"} <= set(alerts)  # fmt: skip
    assert "slurm_controller_up" in metric_names(alerts["SlurmControllerDown"])
    assert "reconciler_slurm_snapshot_age_seconds" in metric_names(alerts["SlurmMetricsStale"])


def rest_only_documented() -> set[str]:
    """The families docs/metrics.md's per-source table marks REST-only."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^\| `(slurm_\w+)` \| REST only \|", text, re.M))


@pytest.mark.parametrize(("title", "expr"), dashboard_queries(), ids=lambda x: x[:50])
def test_every_panel_works_on_both_sources_or_says_it_does_not(title: str, expr: str) -> None:
    names = metric_names(expr)
    on_rest, on_openmetrics = exported_names(SOURCE_REST), exported_names(SOURCE_OPENMETRICS)
    if names <= on_openmetrics:
        assert names <= on_rest, f"{title}: not served through slurmrestd: {names - on_rest}"
        return
    assert title.endswith(REST_ONLY_PANEL), f"{title}: not on OpenMetrics: {names - on_openmetrics}"
    assert names - on_openmetrics <= rest_only_documented(), "docs/metrics.md: not marked REST only"


@pytest.mark.parametrize(("alert", "expr"), rule_exprs().items(), ids=lambda x: x[:40])
def test_every_alert_has_a_branch_for_each_source(alert: str, expr: str) -> None:
    sources = {SOURCE_REST: exported_names(SOURCE_REST),
               SOURCE_OPENMETRICS: exported_names(SOURCE_OPENMETRICS)}  # fmt: skip
    for source, served in sources.items():
        assert any(metric_names(b) <= served for b in branches(expr)), (
            f"{alert}: no {source} branch"
        )


def test_the_rest_only_families_are_documented_as_such() -> None:
    assert rest_only_documented() == REST_ONLY


def test_branches_split_on_the_top_level_or_on_only() -> None:
    expr = "a > 0 or on() (b > 0 or on() c and on() d) and on() e"
    assert branches(expr) == ["a > 0 ", " (b > 0 or on() c and on() d) and on() e"]
