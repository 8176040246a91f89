"""Values that reach the line-oriented files we render besides Slurm's own (slurm_words.py has
those): sssd.conf and the authtok snippet, plugstack.conf, the s6, prolog/epilog and Lua scripts.
Checked where they are written, so the refusal names the file, line and key.

- A one-line value (a URI, a path, a shell, a DN, a password, a name) holds no control
  character (control_chars.py): a line feed in `ldapUri` wrote a second `[domain/...]` section
  into sssd.conf, one in `user.password` a second key into the authtok snippet. sssd reads an
  ini file whose comments and sections start a line only, so without a line break a value
  stays one value (sssd.conf(5): "inline comments are not supported").
- `compute.pyxis.pluginPath` is one word: spank(8) splits a plugstack.conf line at spaces and
  tabs (the rest are the plugin's arguments) and cuts it at the first '#', and reads a line
  into 4,096 bytes (the rest of a longer line is read as a line of its own).
- A script (s6, prolog, epilog, Lua) is many lines by nature: it holds line feeds and tabs, no
  other control character. A CR breaks the `#!` line ("bad interpreter: /bin/sh^M") and, like
  ESC or a backspace, lets the script read otherwise in a terminal or a diff than it runs; a NUL
  ends a C string, so a tool shows less of the script than runs. None has a use in a script that an
  escape like `printf '\\r'` does not serve.
"""

from __future__ import annotations

from typing import Any

from reconciler.config.control_chars import character_name, control_character
from reconciler.config.directory import DIRECTORY_ENTRY
from reconciler.config.lua_plugins import LUA_PATH, LUA_PLUGINS
from reconciler.config.slurm_words import WORD, check_text
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError

# Far above any install path, and keeps pyxis's plugstack.conf line inside spank's 4,096 bytes.
MAX_PLUGIN_PATH = 1024
PLUGIN_PATH: KeyPath = ("compute", "pyxis", "pluginPath")
# Where each directory key is written, for the message; sssd.conf unless named here.
_DIRECTORY_FILES = {
    "user.password": "the authtok snippet sssd reads",
    "user.canary": "the sssd sidecar's readiness probe",
    "user.existingSecret": "the Pod's volumes (a Secret's name)",
    "ldapsCert": "the Pod's volumes (a Secret's name)",
}
_SECRETS = ("user.password",)
_SCRIPT_HINT = (
    "a script may hold line breaks (LF) and tabs, no other control character: save it with LF "
    "line endings (dos2unix), and write a control character your script prints as an escape "
    "(printf '\\r')"
)


def check_rendered_values(doc: YamlFile) -> None:
    """A values file: every value we render into a line-oriented file other than Slurm's."""
    _check_directories(doc)
    _check_plugin_path(doc)
    _check_scripts(doc)


def _check_directories(doc: YamlFile) -> None:
    entries, _ = lookup(doc.data, ("directoryService", "directories"))
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        for dotted in DIRECTORY_ENTRY:
            value, found = lookup(entry, dotted.split("."))
            if found and isinstance(value, str):
                path: KeyPath = ("directoryService", "directories", index, *dotted.split("."))
                where = _DIRECTORY_FILES.get(dotted, "sssd.conf")
                _check_one_line(doc, path, value, where, secret=dotted in _SECRETS)


def _check_one_line(
    doc: YamlFile, path: KeyPath, value: str, where: str, *, secret: bool = False
) -> None:
    bad = control_character(value)
    if bad is None:
        return
    shown = "a control character" if secret else character_name(bad)
    raise ConfigTypeError(
        f"{format_path(path)} holds {shown}, which would break its line in {where}",
        where=doc.location(path),
        hint="this key is one line: no line breaks, tabs or other control characters",
    )


def _check_plugin_path(doc: YamlFile) -> None:
    path, found = lookup(doc.data, PLUGIN_PATH)
    if not found or not isinstance(path, str):
        return
    if not WORD.fullmatch(path) or len(path) > MAX_PLUGIN_PATH:
        raise ConfigTypeError(
            f"compute.pyxis.pluginPath must be one path of at most {MAX_PLUGIN_PATH} printable "
            "ASCII characters, without spaces, '#', quotes or backslashes",
            where=doc.location(PLUGIN_PATH),
            hint="plugstack.conf reads a space or a tab as the start of the plugin's arguments, "
            "and '#' as a comment (spank(8)); pyxis's arguments are ours to write",
        )


def _check_scripts(doc: YamlFile) -> None:
    services, _ = lookup(doc.data, ("compute", "s6"))
    for name, service in (services if isinstance(services, dict) else {}).items():
        script = service.get("script") if isinstance(service, dict) else None
        if isinstance(script, str):
            _check_script(doc, ("compute", "s6", name, "script"), script)
    for kind in ("prolog", "epilog"):
        path: KeyPath = ("slurmConfig", "slurmd", kind)
        _check_script_source(doc, path, lookup(doc.data, path)[0])
    for name in LUA_PLUGINS:
        lua: KeyPath = (*LUA_PATH, name)
        _check_script_source(doc, lua, lookup(doc.data, lua)[0])


def _check_script_source(doc: YamlFile, path: KeyPath, source: Any) -> None:
    """slurmd.prolog is one script, or a mapping of file name -> script."""
    if isinstance(source, str):
        _check_script(doc, path, source)
    if not isinstance(source, dict):
        return
    for name, script in source.items():
        if control_character(str(name)) is not None:  # the name would break the error's line
            raise ConfigTypeError(
                f"a file name of {format_path(path)} holds "
                f"{character_name(control_character(str(name)) or '')}",
                where=doc.location(path),
                hint="a file name is one line: no line breaks, tabs or other control characters",
            )
        if isinstance(script, str):
            _check_script(doc, (*path, name), script)


def _check_script(doc: YamlFile, path: KeyPath, script: str) -> None:
    check_text(doc, path, script, _SCRIPT_HINT)
