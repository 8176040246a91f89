"""`plan` on the real local stack: a job runs on a node that a repo change removes, and the
markdown comment names it (id, user, partition) in the disruptive section, read from
slurmrestd at plan time; a new Slurm image tag is planned as an upgrade in stages."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.slurm_release import parse_release
from tests.integration.helpers import wait_for
from tests.integration.local_up import RunningUp, local_up, reconciler_cli

pytestmark = pytest.mark.integration

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
NODE = "slurm-gpu-small-1"


@pytest.fixture(scope="module")
def stack(stack_timings: dict[str, float]) -> Iterator[tuple[RunningUp, Path]]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-comment-"))
    work.chmod(0o755)
    up_repo, repo = work / "up-repo", work / "repo"
    shutil.copytree(FIXTURE_REPO, up_repo)
    shutil.copytree(FIXTURE_REPO, repo)
    try:
        with local_up(up_repo, work / "up.log", prefix="sunk-reconciler-comment-",
                      timings=stack_timings, label="plan comment") as running:  # fmt: skip
            yield running, repo
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_comment_names_the_job_on_a_node_the_change_removes(
    stack: tuple[RunningUp, Path],
) -> None:
    running, repo = stack
    slurm = running.stack.slurm
    assert isinstance(slurm, SlurmCluster)
    job_id = slurm.run("sbatch", "--parsable", "-p", "gpu", "-w", NODE, "-o", "/dev/null",
                       "--wrap", "sleep 600").strip().split(";")[0]  # fmt: skip

    def state() -> str:
        return slurm.run("squeue", "-h", "-j", job_id, "-o", "%T %u", check=False)

    try:
        wait_for(lambda: state().startswith("RUNNING"), 30, f"job {job_id} RUNNING")
        user = state().split()[1]
        scale = repo / "values.d" / "10-gpu-scale.yaml"
        scale.write_text(scale.read_text().replace("replicas: 2", "replicas: 1"))

        done = reconciler_cli("plan", str(repo), "--runtime-dir", str(running.runtime),
                              "-o", "markdown", "--environment", "local", timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        comment = done.stdout
        assert comment.startswith("<!-- reconciler-plan:local verdict=disruptive part=1/1 -->")
        caution = comment[comment.index("> [!CAUTION]") : comment.index("<details>")]
        assert f"drain and retire Slurm node {NODE}" in caution
        row = f"> | {job_id} | {user} | gpu | RUNNING | {NODE} |"
        assert row in caution, comment
    finally:
        slurm.run("scancel", job_id, check=False)


def test_plan_warns_of_a_node_label_no_node_carries(
    stack: tuple[RunningUp, Path], tmp_path: Path
) -> None:
    """compute.clusterLabels: a name the cluster's Nodes lack is named in `plan`
    with the key to set; the names the local Nodes carry give no such warning."""
    running, _ = stack

    def plan(repo: Path) -> str:
        done = reconciler_cli("plan", str(repo), "--runtime-dir", str(running.runtime),
                              timeout=120)  # fmt: skip
        assert done.returncode in (0, 2), done.stderr
        return done.stdout + done.stderr  # the plan's warnings are in its text

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    assert "will stay Pending" not in plan(repo)
    (repo / "values.d" / "60-labels.yaml").write_text(
        "compute:\n  clusterLabels:\n    cpu: example.com/cpu-type\n"
    )
    said = plan(repo)
    assert (
        "node set 'cpu' selects the Node label example.com/cpu-type, which none of the "
        "cluster's" in said
    ), said
    assert "set compute.clusterLabels.cpu to the name your Nodes carry" in said, said


def test_plan_of_a_new_slurm_release_shows_the_upgrade_stages_or_refuses(
    stack: tuple[RunningUp, Path], tmp_path: Path
) -> None:
    """A new image tag is a Slurm upgrade: stages in Slurm's order from the release the live
    daemons run; a downgrade or a jump past the window is refused with the rule and its
    source, before anything is shown."""
    running, _ = stack
    live = parse_release(running.slurm.install.version)
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    tag = repo / "values.d" / "90-slurm-release.yaml"

    def plan(release: str, *extra: str) -> subprocess.CompletedProcess[str]:
        tag.write_text(f'image:\n  tag: "{release}"\n')
        return reconciler_cli("plan", str(repo), "--runtime-dir", str(running.runtime),
                              "--detailed-exitcode", *extra, timeout=120)  # fmt: skip

    target = "26.11.1" if live.series == "26.05" else "26.05.3"  # a hand-built 26.05 stack
    upgrade = plan(target)
    if live.series == "22.05":  # the stack's --slurm 22.05: past 26.05's window
        assert upgrade.returncode == 1, upgrade.stdout + upgrade.stderr
        assert "22.05.8 -> 26.05.3 jumps past the upgrade window" in upgrade.stderr
        assert "26.05 upgrades only from 25.11, 25.05, 24.11" in upgrade.stderr
        return
    assert upgrade.returncode == 2, upgrade.stdout + upgrade.stderr
    stages = [line for line in upgrade.stdout.splitlines() if line.startswith("upgrade stage")]
    assert [line.split(": ")[1] for line in stages] == [
        f"{component} {live} -> {target}"
        for component in ("slurmdbd", "slurmctld", "slurmd", "login/slurmrestd")
    ], upgrade.stdout
    assert "StatefulSet slurm/slurm-cpu, StatefulSet slurm/slurm-gpu-small" in stages[2]
    as_json = json.loads(plan(target, "-o", "json").stdout)
    assert [s["component"] for s in as_json["upgrade"]] == [
        "slurmdbd", "slurmctld", "slurmd", "login/slurmrestd"]  # fmt: skip

    downgrade = plan("22.05.8")
    assert downgrade.returncode == 1, downgrade.stdout + downgrade.stderr
    assert downgrade.stdout == ""
    said = downgrade.stderr.strip().splitlines()  # the repo's warnings, then the refusal
    assert said[-1].startswith("error: Slurm upgrade refused: "), said
    assert f"{live} -> 22.05.8 is a downgrade" in said[-1], said
    assert "SchedMD's doc/html/upgrades.shtml" in said[-1]
    # apply plans the same way: refused before it changes anything.
    applied = reconciler_cli("apply", str(repo), "--runtime-dir", str(running.runtime), "--yes",
                             timeout=120)  # fmt: skip
    assert applied.returncode == 1 and "is a downgrade" in applied.stderr, applied.stderr
