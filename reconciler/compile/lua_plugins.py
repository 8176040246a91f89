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

The Pod scheduler marks each placeholder job in its AdminComment (as it submits as the Pod's
user, the job's name is the user's to change): a job_submit.lua that assigns admin_comment
erases the mark, and the scheduler no longer knows the job as its own, so it is warned.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.compile.lines import write_script
from reconciler.config.lua_plugins import LUA_PLUGINS, lua_scripts
from reconciler.errors import CompileError, Warning_

LUA = "lua"
_SETTING = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(\S+)")
# An assignment to a job's admin_comment (`.admin_comment =` or `["admin_comment"] =`), not a
# comparison (`==`, `~=`).
_WRITES_ADMIN_COMMENT = re.compile(r"admin_comment\s*['\"]?\s*\]?\s*=(?!=)")


def lua_files(values: dict[str, Any]) -> dict[str, str]:
    """File name -> text, for the slurm-conf ConfigMap."""
    return {LUA_PLUGINS[name].file: write_script(_key(name), text)
            for name, text in lua_scripts(values).items()}  # fmt: skip


def lua_settings(values: dict[str, Any]) -> dict[str, str]:
    """The slurm.conf settings that load the scripts given (before extraConfig's)."""
    return {LUA_PLUGINS[name].setting: LUA for name in lua_scripts(values)}


def admin_comment_warnings(values: dict[str, Any]) -> list[Warning_]:
    """job_submit.lua assigning admin_comment, while the Pod scheduler runs."""
    script = lua_scripts(values).get("jobSubmit", "")
    line = next((s.strip() for s in script.splitlines() if _WRITES_ADMIN_COMMENT.search(s)), None)
    if line is None:
        return []
    return [Warning_(_key("jobSubmit"), "job_submit.lua assigns admin_comment, where the Pod "
                     f"scheduler marks its placeholder jobs ({line!r}): a job whose mark it "
                     "changes is no longer known as the Pod's, so the Pod gets a second job "
                     "and the first is never cancelled; leave admin_comment as it is, or "
                     "change it only for jobs whose admin_comment is empty")]  # fmt: skip


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
