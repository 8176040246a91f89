"""Settings for long-running commands: flags > environment > config file > built-in defaults.

Every option of a command can also come from `RECONCILER_<OPTION>` (upper case, dashes as
underscores: `--git-url` is `RECONCILER_GIT_URL`) or from the YAML mapping in `--config FILE`
(keys as the flags are spelled, without the dashes: `git-url: https://...`). A Deployment
then sets secrets through the environment and the rest in a mounted file.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import ReconcilerError
from reconciler.logs import LOG_FORMATS

ENV_PREFIX = "RECONCILER_"
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def env_name(option: str) -> str:
    return ENV_PREFIX + option.lstrip("-").upper().replace("-", "_")


def layered_defaults(
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    environ: Mapping[str, str] = os.environ,
) -> dict[str, Any]:
    """Defaults for `parser` from its config file (named by --config in argv, or by
    RECONCILER_CONFIG) overlaid with the environment; flags still win when parsed."""
    config_path = _config_path(argv, environ)
    from_file = _read_config(config_path) if config_path else {}
    defaults: dict[str, Any] = {}
    for action in parser._actions:
        option = _long_option(action)
        if option is None or action.dest in ("help", "config"):
            continue
        key = option.lstrip("-")
        raw: Any = None
        if key in from_file:
            raw = from_file[key]
        if env_name(option) in environ:
            raw = environ[env_name(option)]
        if raw is not None:
            defaults[action.dest] = _typed(action, raw, option)
    unknown = sorted(
        set(from_file) - {(_long_option(a) or "").lstrip("-") for a in parser._actions}
    )
    if unknown:
        raise ReconcilerError(
            f"{config_path}: unknown settings {', '.join(unknown)}",
            hint="keys are the command's flags without the dashes (see --help)",
        )
    return defaults


def describe_environment(parser: argparse.ArgumentParser) -> str:
    """An epilog for --help listing every environment variable."""
    names = [
        env_name(option)
        for action in parser._actions
        if (option := _long_option(action)) and action.dest not in ("help", "config")
    ]
    return (
        "Every flag can also be set by an environment variable or in the --config file "
        "(flags win over the environment, which wins over the file): "
        + ", ".join(names)
        + f", {ENV_PREFIX}CONFIG."
    )


def _config_path(argv: Sequence[str], environ: Mapping[str, str]) -> Path | None:
    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            return Path(argv[index + 1])
        if arg.startswith("--config="):
            return Path(arg.split("=", 1)[1])
    value = environ.get(f"{ENV_PREFIX}CONFIG")
    return Path(value) if value else None


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ReconcilerError(f"cannot read config file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ReconcilerError(f"{path}: not valid YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ReconcilerError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _long_option(action: argparse.Action) -> str | None:
    return next((o for o in action.option_strings if o.startswith("--")), None)


def _typed(action: argparse.Action, raw: Any, option: str) -> Any:
    if isinstance(action, argparse._StoreTrueAction):
        text = str(raw).strip().lower()
        if text not in TRUE | FALSE:
            raise ReconcilerError(f"{option}: expected true or false, got {raw!r}")
        return text in TRUE
    if isinstance(action, argparse._AppendAction):
        return [str(v) for v in raw] if isinstance(raw, list) else str(raw).split(",")
    try:
        return action.type(str(raw)) if callable(action.type) else str(raw)
    except argparse.ArgumentTypeError as error:  # the type's own words, as argparse says them
        raise ReconcilerError(f"{option}: invalid value {raw!r}: {error}") from None
    except (TypeError, ValueError):
        raise ReconcilerError(f"{option}: invalid value {raw!r}") from None


def log_format_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text",
        help="text for a terminal, json (one object a line) for a log collector (text)",
    )  # fmt: skip
