"""slurmConfig.luaPlugins read by the real Slurm where the render puts it: cli_filter.lua in the
login Pod's /etc/slurm (the slurm-conf ConfigMap laid out as the Pod mounts it), run by the real
sbatch before it reaches any slurmctld.

Debian 12's Slurm 22.05 has the Lua plugins: the script runs and refuses the job. The local
24.11 build (as our image) has none: sbatch stops, as the plan's warning says. job_submit.lua
is read by slurmctld from the same folder (get_extra_conf_path, as cli_filter.lua); no local
slurmctld with Lua runs it here (the 24.11 build has no liblua, docs/images.md).
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
from reconciler.local.slurm_install import slurm_install
from reconciler.local.volumes import HostLayout, Materializer, pod_mounts

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


def test_slurm_2205_runs_the_repos_cli_filter_lua_on_the_login_pod(tmp_path: Path) -> None:
    etc = _login_etc_slurm(tmp_path)
    assert "CliFilterPlugins=lua" in (etc / "slurm.conf").read_text().splitlines()
    done = _sbatch("22.05", etc)
    assert done.returncode != 0 and done.stdout == ""
    assert "cli_filter.lua from the repo refuses job lua-probe" in done.stderr, done.stderr


def test_the_2411_build_has_no_lua_plugin_as_the_plan_warns(tmp_path: Path) -> None:
    done = _sbatch("24.11", _login_etc_slurm(tmp_path))
    assert done.returncode != 0
    assert "cannot find cli_filter plugin for cli_filter/lua" in done.stderr, done.stderr
