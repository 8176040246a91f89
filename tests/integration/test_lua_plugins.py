"""slurmConfig.luaPlugins read by the real Slurm where the render puts it: cli_filter.lua in the
login Pod's /etc/slurm (the slurm-conf ConfigMap laid out as the Pod mounts it), run by the real
sbatch before it reaches any slurmctld, on Debian 12's 22.05 and on our 24.11 build (built with
Lua, as our image: docs/images.md); job_submit.lua run by the local stack's real slurmctld,
which reads it beside slurm.conf (get_extra_conf_path), where the controller Pod mounts it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.local.agent.volumes import HostLayout, Materializer, pod_mounts
from reconciler.local.slurm.install import slurm_install
from tests.integration.local_up import local_up

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
CLI_FILTER = """\
slurmConfig:
  luaPlugins:
    cliFilter: |
      function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
      function slurm_cli_pre_submit(options, pack_offset)
        slurm.log_error("cli_filter.lua from the repo refuses job %s", options["job-name"])
        return slurm.ERROR
      end
      function slurm_cli_post_submit(offset, job_id, step_id) return slurm.SUCCESS end
"""


def _login_etc_slurm(tmp_path: Path) -> Path:
    """The fixture repo with CLI_FILTER, compiled; the login Pod's /etc/slurm, laid out."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "values.d" / "50-lua.yaml").write_text(CLI_FILTER)
    state = compile_desired_state(load_config(read_repo(repo), read_library()))
    found = {(o["kind"], o["metadata"]["name"]): o for o in state.kube_objects}
    spec = found[("StatefulSet", "slurm-login")]["spec"]["template"]["spec"]
    pod = {"metadata": {"name": "slurm-login-0", "namespace": "slurm"}, "spec": spec}
    files = Materializer(HostLayout({}, tmp_path / "pods"),
                         lambda kind, _ns, name: found.get((kind, name)))  # fmt: skip
    etc = next(m for m in pod_mounts(pod, ["sshd"]) if str(m.path) == "/etc/slurm")
    files.mount(pod, etc)
    return files.host_path(pod, etc.path)


def _sbatch(release: str, etc: Path) -> subprocess.CompletedProcess[str]:
    install = slurm_install(release)
    sbatch = install.command("sbatch")
    if sbatch is None:
        pytest.skip(f"no sbatch for Slurm {release} on this machine")
    env = install.env({**os.environ, "SLURM_CONF": str(etc / "slurm.conf")})
    return subprocess.run([sbatch, "-J", "lua-probe", "--wrap", "true"], capture_output=True,
                          text=True, env=env, timeout=30, check=False)  # fmt: skip


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_sbatch_runs_the_repos_cli_filter_lua_on_the_login_pod(
    release: str, tmp_path: Path
) -> None:
    etc = _login_etc_slurm(tmp_path)
    assert "CliFilterPlugins=lua" in (etc / "slurm.conf").read_text().splitlines()
    done = _sbatch(release, etc)
    assert done.returncode != 0 and done.stdout == ""
    assert "cli_filter.lua from the repo refuses job lua-probe" in done.stderr, done.stderr


JOB_SUBMIT = """\
slurmConfig:
  luaPlugins:
    jobSubmit: |
      function slurm_job_submit(job_desc, part_list, submit_uid)
        if job_desc.name == "lua-refused" then
          slurm.log_user("job_submit.lua from the repo refuses %s", job_desc.name)
          return slurm.ERROR
        end
        job_desc.comment = "set by job_submit.lua from the repo"
        return slurm.SUCCESS
      end
      function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
        return slurm.SUCCESS
      end
"""


def test_slurmctld_runs_the_repos_job_submit_lua(
    tmp_path: Path, stack_timings: dict[str, float]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "values.d" / "50-lua.yaml").write_text(JOB_SUBMIT)
    with local_up(repo, tmp_path / "up.log", prefix="sunk-reconciler-lua-",
                  timings=stack_timings, label="lua tests") as running:  # fmt: skip
        slurm = running.slurm
        assert "JobSubmitPlugins=lua" in slurm.run("scontrol", "show", "config").replace(" ", "")
        job = slurm.run("sbatch", "--parsable", "-H", "-J", "lua-probe", "-o", "/dev/null",
                        "--wrap", "true").strip()  # fmt: skip
        shown = slurm.run("scontrol", "show", "job", job)
        assert "Comment=set by job_submit.lua from the repo" in shown, shown
        slurm.run("scancel", job)
        refused = subprocess.run(
            ["sbatch", "-J", "lua-refused", "--wrap", "true"], env=slurm.env(),
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert refused.returncode != 0
        assert "job_submit.lua from the repo refuses lua-refused" in refused.stderr, refused.stderr
