"""deploy/monitoring agrees with /metrics: every PromQL expression of the PrometheusRule and of
the Grafana dashboard names only series the daemon exports, as its registry collects them (a
renamed metric breaks an alert silently otherwise), and each alert the issue asks for is there."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.daemon.metrics import DaemonMetrics
from reconciler.slurm_metrics.reader import SlurmView
from tests.unit.test_slurm_metrics import figures

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
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


def exported_names() -> set[str]:
    """Every sample name the daemon's registry serves, with the Slurm reader's families
    present (as after a read of an empty cluster)."""
    metrics = DaemonMetrics()
    families = tuple(figures().values())
    metrics.watch_slurm(lambda: SlurmView(families, 0.0, 0.1, True, 0, 0.0))
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


def dashboard_exprs() -> list[str]:
    board = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]
    for variable in board["templating"]["list"]:
        query: Any = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        if found := re.fullmatch(r"label_values\((.*),\s*\w+\)", text):
            exprs.append(found.group(1))
    return exprs


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


def test_the_alerts_the_issue_asks_for() -> None:
    alerts = rule_exprs()
    assert {"SlurmControllerDown", "SlurmNodesDrained", "SlurmSchedulerBacklog",
            "SlurmMetricsStale"} <= set(alerts)  # fmt: skip
    assert "slurm_controller_up" in metric_names(alerts["SlurmControllerDown"])
    assert "reconciler_slurm_snapshot_age_seconds" in metric_names(alerts["SlurmMetricsStale"])
