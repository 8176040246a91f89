"""`reconciler plan --offline` of SUNK's pages' own examples says what a migrating SUNK user hits:
the warnings on stderr with a plan, the contradictions as errors without one."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_cli import run, write_repo
from tests.unit.test_job_scripts import PAGE_CONFIG_MAPS
from tests.unit.test_node_memory import RTX4000, SLURM_PAGE_SLURM_CONFIG


def test_the_pages_memory_settings_are_warned_in_the_plan(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, SLURM_PAGE_SLURM_CONFIG + RTX4000)
    result = run("plan", str(repo), "--offline")
    assert result.returncode == 0, result.stderr
    assert "slurmConfig.selectTypeParameters: warning: SelectTypeParameters=CR_Core " in (
        result.stderr
    )
    assert "set CR_Core_Memory" in result.stderr
    assert "slurmConfig.defMemPerCPU: warning: DefMemPerCPU=4096 MiB x 8 CPUs" in result.stderr


def test_the_pages_prolog_config_map_is_refused_for_release_slurm(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, PAGE_CONFIG_MAPS + RTX4000)
    result = run("plan", str(repo), "--offline")
    assert result.returncode == 1 and result.stdout == ""
    assert "slurmConfig.slurmd.prologConfigMap is 'slurm-prolog'" in result.stderr
    assert "hint: rename your ConfigMap" in result.stderr and "Traceback" not in result.stderr


def test_the_pages_suspend_time_without_the_scheduler_is_refused(tmp_path: Path) -> None:
    # SUNK's "Slurm Workload Manager" page: "slurmConfig.slurmd.suspendTime | Pods which remain idle
    # or down for this amount of time will be deleted"; SUNK's "SUNK Pod Scheduler" page: "Set
    # scheduler.enabled to true".
    values = "slurmConfig:\n  slurmd: {suspendTime: 600}\nscheduler: {enabled: false}\n"
    result = run("plan", str(write_repo(tmp_path, values + RTX4000)), "--offline")
    assert result.returncode == 1 and result.stdout == ""
    assert "scheduler.enabled is false" in result.stderr and "Pending forever" in result.stderr


def test_the_pages_login_sidecar_is_in_the_plan_not_refused(tmp_path: Path) -> None:
    # SUNK's "About SUNK": "Infrastructure engineers can add sidecar containers to Slurm login and
    # compute nodes". Before: "login.containers is not a key this reconciler reads".
    values = "login:\n  containers:\n  - {name: node-exporter, image: prom/node-exporter}\n"
    result = run("plan", str(write_repo(tmp_path, values + RTX4000)), "--offline")
    assert result.returncode == 0, result.stderr
    assert "login.containers" not in result.stderr
    assert "- name: node-exporter" in result.stdout


def test_the_pages_lua_plugin_is_in_the_plan(tmp_path: Path) -> None:
    # SUNK's "About SUNK": "Infrastructure engineers can use Lua scripts to customize job
    # submission".
    values = (
        "slurmConfig:\n  luaPlugins:\n    jobSubmit: |\n"
        "      function slurm_job_submit(job_desc, part_list, submit_uid) return 0 end\n"
        "      function slurm_job_modify(job_desc, job_rec, part_list, uid) return 0 end\n"
    )
    result = run("plan", str(write_repo(tmp_path, values + RTX4000)), "--offline")
    assert result.returncode == 0, result.stderr
    assert "job_submit.lua: |" in result.stdout and "+JobSubmitPlugins=lua" in result.stdout
    assert "luaPlugins" not in result.stderr  # used, and our image loads it: no warning
    assert "is not a key" not in result.stderr
