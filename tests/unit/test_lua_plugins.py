"""Slurm's Lua plugins from the repo (SUNK's "About SUNK": "Infrastructure engineers can use Lua
scripts to customize job submission and execution"): slurmConfig.luaPlugins
becomes job_submit.lua and cli_filter.lua beside slurm.conf, and the lines that load them."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.compile.desired import DesiredState
from reconciler.compile.manifests import CONF_MOUNT
from reconciler.errors import CompileError, ConfigTypeError
from tests.unit.test_control_plane import objects, pod_of, state_of

# The two uses in SUNK's "About SUNK": customize job submission (job_submit.lua) and what clients
# submit (cli_filter.lua). Both after Slurm's contribs/lua examples.
JOB_SUBMIT = """\
    jobSubmit: |
      function slurm_job_submit(job_desc, part_list, submit_uid)
        if job_desc.comment == nil then job_desc.comment = "via job_submit.lua" end
        return slurm.SUCCESS
      end
      function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
        return slurm.SUCCESS
      end
"""
CLI_FILTER = """\
    cliFilter: |
      function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
      function slurm_cli_pre_submit(options, pack_offset) return slurm.SUCCESS end
      function slurm_cli_post_submit(offset, job_id, step_id) return slurm.SUCCESS end
"""


def _lua(*scripts: str, extra: str = "") -> str:
    return "slurmConfig:\n" + extra + "  luaPlugins:\n" + "".join(scripts)


def _conf_map(state: DesiredState) -> dict[str, str]:
    return objects(state)[("ConfigMap", "slurm-slurm-conf")]["data"]


def _mounts_conf_map(obj: dict[str, Any]) -> bool:
    pod = pod_of(obj)
    volume = next(v["name"] for v in pod["volumes"]
                  if v.get("configMap", {}).get("name") == "slurm-slurm-conf")  # fmt: skip
    return any(m["name"] == volume and m["mountPath"] == CONF_MOUNT
               for m in pod["containers"][0]["volumeMounts"])  # fmt: skip


def test_job_submit_lua_goes_beside_slurm_conf_and_slurm_conf_loads_it() -> None:
    state = state_of(_lua(JOB_SUBMIT))
    data = _conf_map(state)
    assert data["job_submit.lua"].startswith("function slurm_job_submit(job_desc, part_list")
    assert "JobSubmitPlugins=lua" in state.slurm_conf.splitlines()
    assert "cli_filter.lua" not in data and "CliFilterPlugins" not in state.slurm_conf
    # slurmctld reads it from the directory of slurm.conf, which its Pod mounts.
    assert _mounts_conf_map(objects(state)[("Deployment", "slurm-controller")])


def test_cli_filter_lua_reaches_the_login_pods_where_clients_run() -> None:
    state = state_of(_lua(CLI_FILTER))
    assert "slurm_cli_pre_submit" in _conf_map(state)["cli_filter.lua"]
    assert "CliFilterPlugins=lua" in state.slurm_conf.splitlines()
    assert _mounts_conf_map(objects(state)[("StatefulSet", "slurm-login")])
    assert _mounts_conf_map(objects(state)[("Deployment", "slurm-controller")])


def test_no_scripts_render_no_files_and_no_lines() -> None:
    state = state_of("")
    assert not {"job_submit.lua", "cli_filter.lua"} & set(_conf_map(state))
    assert "Plugins=lua" not in state.slurm_conf


def test_our_image_loads_lua_so_no_warning_is_given() -> None:
    """Our image's Slurm has job_submit_lua.so and cli_filter_lua.so (deploy/images/slurm)."""
    state = state_of(_lua(JOB_SUBMIT, CLI_FILTER))
    assert not [w for w in state.warnings if "Lua" in str(w) or "lua" in str(w)]


def test_an_empty_script_is_refused_with_its_key() -> None:
    with pytest.raises(ConfigTypeError) as caught:
        state_of(_lua("    jobSubmit: ''\n"))
    assert "values.yaml:3 (slurmConfig.luaPlugins.jobSubmit)" in str(caught.value)
    assert "would load an empty job_submit.lua" in str(caught.value)
    assert "remove the key" in str(caught.value)


def test_an_unknown_plugin_name_is_refused_with_the_ones_we_render() -> None:
    with pytest.raises(ConfigTypeError) as caught:
        state_of(_lua("    jobsubmit: 'x'\n"))
    assert "'jobsubmit' is not a Slurm Lua plugin" in str(caught.value)
    assert "one of jobSubmit (job_submit.lua), cliFilter (cli_filter.lua)" in str(caught.value)


def test_a_script_without_a_function_slurm_requires_is_refused() -> None:
    # slurmctld fatals at start on a job_submit.lua that lacks one (slurm_lua_loadscript).
    script = "    jobSubmit: |\n      function slurm_job_submit(j, p, u) return 0 end\n"
    with pytest.raises(ConfigTypeError, match="defines no slurm_job_modify"):
        state_of(_lua(script))


def test_a_carriage_return_in_a_script_is_refused() -> None:
    with pytest.raises(ConfigTypeError, match=r"luaPlugins\.jobSubmit line 1 holds"):
        state_of(
            _lua(
                '    jobSubmit: "function slurm_job_submit() end\\r\\n'
                'function slurm_job_modify() end"\n'
            )
        )


def test_extra_config_that_does_not_load_lua_is_a_plan_error_naming_both() -> None:
    extra = "  extraConfig: JobSubmitPlugins=require_timelimit\n"
    with pytest.raises(CompileError) as caught:
        state_of(_lua(JOB_SUBMIT, extra=extra))
    text = str(caught.value)
    assert "slurmConfig.luaPlugins.jobSubmit is set, but slurmConfig.extraConfig sets " \
           "JobSubmitPlugins=require_timelimit" in text  # fmt: skip
    assert "JobSubmitPlugins=lua,require_timelimit" in text


def test_extra_config_that_loads_lua_beside_another_plugin_is_kept() -> None:
    extra = "  extraConfig: jobsubmitplugins=require_timelimit,lua\n"
    state = state_of(_lua(JOB_SUBMIT, extra=extra))
    assert "JobSubmitPlugins=require_timelimit,lua" in state.slurm_conf.splitlines()


def test_extra_config_loading_lua_without_a_script_is_a_plan_error() -> None:
    with pytest.raises(CompileError) as caught:
        state_of("slurmConfig:\n  extraConfig: CliFilterPlugins=lua\n")
    assert "slurmConfig.extraConfig sets CliFilterPlugins=lua, but " \
           "slurmConfig.luaPlugins.cliFilter is not set" in str(caught.value)  # fmt: skip


def test_render_is_the_same_run_to_run() -> None:
    first, second = (state_of(_lua(JOB_SUBMIT, CLI_FILTER)) for _ in range(2))
    assert _conf_map(first) == _conf_map(second)


MARKS = "admin_comment, where the Pod scheduler marks its placeholder jobs"


@pytest.mark.parametrize(
    ("line", "scheduler", "warned"),
    [('job_desc.admin_comment = "site"', "", True),
     ("job_desc['admin_comment']=''", "", True),
     ('job_desc.admin_comment = "site"', "scheduler: {enabled: false}\n", False),
     ('if job_desc.admin_comment == nil then return slurm.SUCCESS end', "", False),
     ('slurm.log_info("%s", job_desc.admin_comment)', "", False)],
)  # fmt: skip
def test_a_job_submit_lua_that_writes_admin_comment_is_warned(
    line: str, scheduler: str, warned: bool
) -> None:
    script = JOB_SUBMIT.replace("        return slurm.SUCCESS\n", f"        {line}\n"
                                "        return slurm.SUCCESS\n", 1)  # fmt: skip
    state = state_of(scheduler + _lua(script))
    found = [str(w) for w in state.warnings if MARKS in str(w)]
    assert len(found) == warned
    if warned:
        assert found[0].startswith("slurmConfig.luaPlugins.jobSubmit: warning: job_submit.lua "
                                   f"assigns {MARKS}")  # fmt: skip
        assert repr(line) in found[0]  # the line, to find it by
