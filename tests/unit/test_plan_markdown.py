"""The plan as a pull-request comment: what a reviewer sees, rendered as GitHub renders it
(cmark-gfm, GitHub's own parser), split into parts under the comment limit."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import cmarkgfm
from cmarkgfm.cmark import Options

from reconciler.plan.comment_parts import GITHUB_COMMENT_LIMIT, size
from reconciler.plan.diff import plan_changes
from reconciler.plan.disruption import disruptions
from reconciler.plan.jsonout import render_gitlab_report
from reconciler.plan.live import LiveJob
from reconciler.plan.markdown import CommentContext, render_markdown
from reconciler.plan.model import SLURM, SLURM_NODE, Action, Change, ObjectRef, Plan
from reconciler.plan.upgrade import UpgradeStage
from tests.unit.test_compile import fixture_state
from tests.unit.test_plan_diff import _live, _node

ALICE = LiveJob(4242, "alice", "gpu", "RUNNING", ("slurm-gpu-small-2",), "slurm-gpu-small-2")
BOB = LiveJob(77, "bob", "cpu", "RUNNING", ("slurm-cpu-0",), "slurm-cpu-0")
QUEUED = LiveJob(90, "carol", "gpu", "PENDING")


def github_html(text: str) -> str:
    # GitHub keeps <details> and <summary> (its sanitizer allows them): render raw HTML too.
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


def _removal_plan() -> Plan:
    """slurm-gpu-small-2 is running in Slurm but no longer declared: drained and retired."""
    nodes = {n.name: _node(n.name) for n in fixture_state().slurm_nodes}
    nodes["slurm-gpu-small-2"] = _node("slurm-gpu-small-2", "MIXED")
    return plan_changes(fixture_state(), _live(slurm_nodes=nodes))


def _comment(plan: Plan, jobs: tuple[LiveJob, ...] | None = (ALICE, BOB, QUEUED),
             **context: object) -> str:  # fmt: skip
    parts = render_markdown(plan, disruptions(plan, jobs), CommentContext(**context))  # type: ignore[arg-type]
    assert len(parts) == 1
    return parts[0]


def test_a_removed_node_names_its_jobs_first_in_red() -> None:
    text = _comment(_removal_plan())
    first, _, rest = text.partition("<details>")
    assert first.splitlines()[0].startswith("<!-- reconciler-plan:slurm verdict=disruptive ")
    assert "**🔴 Disruptive: touches running work** · Slurm nodes: 1 to destroy" in first
    caution = first[first.index("> [!CAUTION]") :]
    assert "drain and retire Slurm node slurm-gpu-small-2" in caution
    assert "> | 4242 | alice | gpu | RUNNING | slurm-gpu-small-2 |" in caution
    assert "bob" not in caution  # on a node that stays
    rendered = github_html(text)
    table = rendered[rendered.index("<table>") : rendered.index("</table>")]
    assert ">4242</td>" in table and "<td>alice</td>" in table and "<td>gpu</td>" in table
    assert "# - Node slurm-gpu-small-2 (delete)" in rest


def test_a_slurm_upgrade_shows_its_stages_in_order_as_a_table() -> None:
    stages = tuple(
        UpgradeStage(n, 4, component, ("24.11.5",), ("26.05.3",), objects, f"check {n}")
        for n, (component, objects) in enumerate((
            ("slurmdbd", ("Deployment slurm/slurm-accounting",)),
            ("slurmctld", ("Deployment slurm/slurm-controller",)),
            ("slurmd", ("StatefulSet slurm/slurm-cpu", "StatefulSet slurm/slurm-gpu-small")),
            ("login/slurmrestd", ("StatefulSet slurm/slurm-login", "Deployment slurm/slurm-rest")),
        ), start=1)
    )  # fmt: skip
    text = _comment(replace(_removal_plan(), upgrade=stages))
    first = text.partition("<details>")[0]
    assert "#### Slurm upgrade, in stages" in first
    rendered = github_html(first)
    table = rendered[rendered.index("Slurm upgrade") :]
    table = table[table.index("<table>") : table.index("</table>")]
    rows = [r for r in table.split("<tr>")[2:]]
    assert [r.split("<td>")[2].split("</td>")[0] for r in rows] == [
        "slurmdbd", "slurmctld", "slurmd", "login/slurmrestd"]  # fmt: skip
    assert "<td>24.11.5</td><td>26.05.3</td>" in rows[0].replace("\n", "")
    assert "StatefulSet slurm/slurm-cpu, StatefulSet slurm/slurm-gpu-small" in rows[2]
    assert "Slurm upgrade" not in _comment(_removal_plan())


def test_the_diff_is_folded_in_details_as_one_intact_diff_block() -> None:
    plan = _removal_plan()
    text = _comment(plan)
    rendered = github_html(text)
    assert re.search(r"<details>\s*<summary>Full diff: 1 changes</summary>", rendered)
    blocks = re.findall(r'<pre lang="diff"><code>(.*?)</code></pre>', rendered, re.S)
    assert len(blocks) == 1
    code = html.unescape(blocks[0])
    assert code.splitlines() == _diff_lines_of(text)
    assert "-gres: gpu:quadro_rtx_4000:7" in code


def _diff_lines_of(text: str) -> list[str]:
    inside = re.findall(r"^```+diff\n(.*?)^```+$", text, re.S | re.M)
    return [line for block in inside for line in block.splitlines()]


def test_partitions_reconfigure_and_restart_touch_work_with_their_jobs() -> None:
    state = fixture_state()
    plan = plan_changes(state, _live(slurm_conf=state.slurm_conf.replace("MaxTime=", "MaxTime=1")))
    found = {d.action.split(" (")[0]: d for d in disruptions(plan, (ALICE, BOB, QUEUED))}
    reconfigure = found.pop("reconfigure slurmctld")
    assert reconfigure.cluster_wide and reconfigure.jobs == (BOB, ALICE)  # running ones
    assert found and all(k.startswith("change partition ") for k in found), found
    assert found["change partition gpu"].jobs == (QUEUED, ALICE)  # queued ones too
    restart = disruptions(replace(plan, controller_restart=True), (ALICE, BOB, QUEUED))
    assert [d.action.split(" (")[0] for d in restart if d.cluster_wide] == ["restart slurmctld"]


def test_no_changes_is_green_and_has_no_diff() -> None:
    state = fixture_state()
    plan = plan_changes(state, _live())
    text = _comment(plan)
    assert "verdict=no-changes" in text
    assert "**🟢 No changes**. The cluster matches the config repo." in text
    assert "<details>" not in text and "[!CAUTION]" not in text


def test_offline_plan_lists_no_jobs_and_is_not_disruptive() -> None:
    plan = plan_changes(fixture_state(), None, offline=True)
    text = _comment(plan, None, jobs_read=False)
    assert "verdict=changes" in text and "Offline plan" in text


def test_stale_plan_warns_and_revisions_are_shown() -> None:
    plan = _removal_plan()
    text = _comment(plan, revision="abc1234", base="def5678", cluster_revision="0123abcd")
    assert "> [!WARNING]" in text and "**Stale plan**" in text
    assert "revision `abc1234`" in text and "base `def5678`" in text
    fresh = _comment(plan, revision="abc1234", base="0123abc", cluster_revision="0123abcdef")
    assert "Stale" not in fresh


def test_secret_data_and_markup_never_reach_the_comment() -> None:
    secret = Change(ObjectRef("kubernetes", "Secret", "slurm", "db"), Action.UPDATE, None,
                    {"kind": "Secret", "metadata": {"name": "db"}},
                    payload={"data": {"password": "aHVudGVyMg=="}})  # fmt: skip
    plan = replace(_removal_plan(), warnings=("<img src=x onerror=alert(1)> *bold* | pipe",),
                   denials=("no `rm -rf` [link](http://x)",))  # fmt: skip
    plan = replace(plan, changes=(*plan.changes, secret))
    text = _comment(plan)
    assert "aHVudGVyMg==" not in text and "hunter2" not in text
    rendered = github_html(text)
    assert "<img" not in rendered and "<em>" not in rendered and ">link</a>" not in rendered
    assert "Deny" in rendered and "onerror" in rendered  # shown as text


def test_ten_thousand_nodes_split_into_parts_under_the_limit_holding_the_whole_plan() -> None:
    changes = tuple(
        Change(ObjectRef(SLURM, SLURM_NODE, "", f"slurm-cpu-{i}"), Action.CREATE, None,
               {"name": f"slurm-cpu-{i}", "cpus": 64, "realMemory": 515000, "gres": None,
                "features": ["cpu", "epyc"]}, notes=("joins when its slurmd Pod starts",))
        for i in range(10_000)
    )  # fmt: skip
    plan = Plan("slurm", "slurm", "cluster", changes)
    whole = render_markdown(plan, [], CommentContext(limit=10**9))
    parts = render_markdown(plan, [], CommentContext())
    assert len(whole) == 1 and len(parts) > 1
    for number, part in enumerate(parts, 1):
        assert size(part) <= GITHUB_COMMENT_LIMIT
        assert f"### Plan for slurm (part {number} of {len(parts)})" in part
        assert f"part={number}/{len(parts)} -->" in part
        rendered = github_html(part)  # each part renders on its own: fences closed
        assert rendered.count("<details>") == rendered.count("</details>") == 1
    assert [line for p in parts for line in _diff_lines_of(p)] == _diff_lines_of(whole[0])
    assert all(f"# + Node slurm-cpu-{i} (create)" in whole[0] for i in (0, 9_999))
    assert "Slurm nodes: 10000 to add" in parts[0]


def test_a_small_limit_splits_the_job_table_with_its_header_again() -> None:
    jobs = tuple(LiveJob(i, "alice", "gpu", "RUNNING", ("slurm-gpu-small-2",), "slurm-gpu-small-2")
                 for i in range(300))  # fmt: skip
    plan = _removal_plan()
    parts = render_markdown(plan, disruptions(plan, jobs), CommentContext(limit=4000))
    assert len(parts) > 2
    rows = [r for p in parts for r in re.findall(r"^> \| (\d+) \| alice", p, re.M)]
    assert rows == [str(i) for i in range(300)]
    for part in parts:
        if "| alice |" in part:
            assert "> | job | user | partition | state | nodes |" in part
            assert "<table>" in github_html(part)


def test_gitlab_report_counts() -> None:
    plan = plan_changes(fixture_state(), None, offline=True)
    summary = plan.summary()
    assert render_gitlab_report(plan) == (
        f'{{"create": {summary.add}, "update": {summary.change}, "delete": {summary.destroy}}}\n'
    )
