"""`slurmConfig.luaPlugins` (ours; SUNK's "About SUNK": "Infrastructure engineers can use Lua
scripts to customize job submission and execution"): the text of Slurm's Lua scripts, written in the
repo, checked in the file that writes them.

    slurmConfig:
      luaPlugins:
        jobSubmit: |          # job_submit.lua, read by slurmctld (JobSubmitPlugins=lua)
          function slurm_job_submit(job_desc, part_list, submit_uid) ... end
          function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) ... end
        cliFilter: |          # cli_filter.lua, read by salloc, sbatch, srun (CliFilterPlugins=lua)
          ...

Slurm loads a script only if it defines every function its plugin calls (slurm_lua_loadscript
checks each one by name): a job_submit.lua without one makes slurmctld fatal at start, a
cli_filter.lua without one fails every salloc, sbatch and srun. A script that never names one
of them cannot define it, so that is refused here, with the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError


@dataclass(frozen=True)
class LuaPlugin:
    file: str  # the name Slurm looks for beside slurm.conf (get_extra_conf_path)
    setting: str  # the slurm.conf key that loads the lua plugin of its kind
    functions: tuple[str, ...]  # the functions Slurm requires (req_fxns in the plugin's C)
    reader: str  # who loads it, for messages


# Slurm 24.11's src/plugins/job_submit/lua/job_submit_lua.c and cli_filter/lua/cli_filter_lua.c.
LUA_PLUGINS: dict[str, LuaPlugin] = {
    "jobSubmit": LuaPlugin("job_submit.lua", "JobSubmitPlugins",
                           ("slurm_job_submit", "slurm_job_modify"), "slurmctld"),
    "cliFilter": LuaPlugin("cli_filter.lua", "CliFilterPlugins",
                           ("slurm_cli_setup_defaults", "slurm_cli_pre_submit",
                            "slurm_cli_post_submit"), "salloc, sbatch and srun"),
}  # fmt: skip
LUA_PATH: KeyPath = ("slurmConfig", "luaPlugins")
LUA_VALUES: Table = {
    "slurmConfig.luaPlugins": Key("mapping", "Slurm's Lua scripts, as text"),
    **{
        f"slurmConfig.luaPlugins.{name}": Key("string", f"{plugin.file}, run by {plugin.reader}")
        for name, plugin in LUA_PLUGINS.items()
    },
}


def check_lua_plugins(doc: YamlFile) -> None:
    """Each script under slurmConfig.luaPlugins (types are checked from LUA_VALUES first)."""
    scripts, found = lookup(doc.data, LUA_PATH)
    if not found or not isinstance(scripts, dict):
        return
    for name, text in scripts.items():
        path: KeyPath = (*LUA_PATH, name)
        plugin = LUA_PLUGINS.get(name)
        if plugin is None:
            raise ConfigTypeError(
                f"{format_path(path)}: {name!r} is not a Slurm Lua plugin this reconciler renders",
                where=doc.location(path),
                hint="one of " + ", ".join(f"{k} ({p.file})" for k, p in LUA_PLUGINS.items()),
            )
        if isinstance(text, str):  # null drops a script an earlier file set
            _check_script(doc, path, plugin, text)


def _check_script(doc: YamlFile, path: KeyPath, plugin: LuaPlugin, text: str) -> None:
    if not text.strip():
        raise ConfigTypeError(
            f"{format_path(path)} is empty: {plugin.reader} would load an empty {plugin.file}",
            where=doc.location(path),
            hint=f"write the script, or remove the key (then slurm.conf sets no "
            f"{plugin.setting}=lua)",
        )
    missing = [f for f in plugin.functions if not re.search(rf"\b{f}\b", text)]
    if missing:
        raise ConfigTypeError(
            f"{format_path(path)} defines no {', '.join(missing)}: Slurm loads {plugin.file} "
            f"only when it defines {', '.join(plugin.functions)}",
            where=doc.location(path),
            hint=f"add `function {missing[0]}(...) return slurm.SUCCESS end` (without it "
            f"{plugin.reader} {'fails to start' if plugin.reader == 'slurmctld' else 'fail'})",
        )


def lua_scripts(values: dict[str, Any]) -> dict[str, str]:
    """Plugin key -> script text, for the scripts the merged values set."""
    scripts = (values.get("slurmConfig") or {}).get("luaPlugins") or {}
    return {name: str(scripts[name]) for name in LUA_PLUGINS if scripts.get(name)}
