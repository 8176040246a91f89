"""`slurmConfig.luaPlugins` -> job_submit.lua and cli_filter.lua in the slurm-conf ConfigMap,
and the slurm.conf lines that load them (pure).

Slurm reads both beside slurm.conf (get_extra_conf_path), and every Pod we render mounts that
ConfigMap at /etc/slurm: slurmctld finds job_submit.lua, and salloc, sbatch and srun find
cli_filter.lua where they run (the login Pods, slurmctld's, and srun inside a job). Both
plugins reload a script whose file changed at their next call, so a new script needs no
`scontrol reconfigure`: kubelet's update of the volume is enough.

A script loads only with `<Setting>=lua` in slurm.conf, which we write; an extraConfig line of
the same key replaces ours (as any setting). That line must still load lua when a script is
given, and may load it only when one is: either way the other is refused, naming both keys.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.compile.lines import write_script
from reconciler.config.lua_plugins import LUA_PLUGINS, lua_scripts
from reconciler.errors import CompileError

LUA = "lua"
_SETTING = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(\S+)")


def lua_files(values: dict[str, Any]) -> dict[str, str]:
    """File name -> text, for the slurm-conf ConfigMap."""
    return {LUA_PLUGINS[name].file: write_script(_key(name), text)
            for name, text in lua_scripts(values).items()}  # fmt: skip


def lua_settings(values: dict[str, Any]) -> dict[str, str]:
    """The slurm.conf settings that load the scripts given (before extraConfig's)."""
    return {LUA_PLUGINS[name].setting: LUA for name in lua_scripts(values)}


def check_lua_settings(slurm_conf: str, values: dict[str, Any]) -> None:
    """The rendered slurm.conf loads the lua plugin of a kind exactly when a script is given."""
    rendered = _settings(slurm_conf)
    given = lua_scripts(values)
    for name, plugin in LUA_PLUGINS.items():
        plugins = rendered.get(plugin.setting.lower(), "")
        loads = LUA in (p.strip().rpartition("/")[2] for p in plugins.split(","))
        if name in given and not loads:
            raise CompileError(
                f"values: {_key(name)} is set, but slurmConfig.extraConfig sets "
                f"{plugin.setting}={plugins}, which does not load lua: {plugin.file} would "
                "never run",
                hint=f"add lua to extraConfig's list ({plugin.setting}=lua,{plugins}), or "
                f"remove the {plugin.setting} line from extraConfig (we write "
                f"{plugin.setting}=lua)",
            )
        if loads and name not in given:
            raise CompileError(
                f"values: slurmConfig.extraConfig sets {plugin.setting}={plugins}, but "
                f"{_key(name)} is not set: {plugin.reader} would find no {plugin.file} in "
                "/etc/slurm",
                hint=f"write the script under {_key(name)}; we render it as {plugin.file}",
            )


def _settings(slurm_conf: str) -> dict[str, str]:
    """slurm.conf's `Key=Value` lines, keys lower case as Slurm compares them (the last wins)."""
    found = {}
    for line in slurm_conf.splitlines():
        if match := _SETTING.match(line.strip()):
            found[match.group(1).lower()] = match.group(2)
    return found


def _key(name: str) -> str:
    return f"slurmConfig.luaPlugins.{name}"
