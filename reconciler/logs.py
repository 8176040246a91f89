"""Where logs go and in what shape: text for a terminal, one JSON object a line for a
collector (Loki, Elasticsearch, Cloud Logging), chosen with --log-format; and how loud.

A daemon runs for months: a quiet minute logs nothing at INFO. The libraries' own INFO lines
(apscheduler's "Running job ..." at every run of every timer) say nothing a user acts on, so
they are kept at WARNING unless RECONCILER_DEBUG asks for everything, DEBUG included."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Final

from pythonjsonlogger.json import JsonFormatter

LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The field names most collectors map without configuration.
JSON_FIELDS: Final = {"asctime": "time", "levelname": "level", "name": "logger"}
# Libraries whose INFO lines are their bookkeeping; their warnings and errors still show.
QUIET_LIBRARIES: Final = ("apscheduler", "urllib3", "kubernetes")


_structured = False  # set by configure_logging: compile warnings then go through the logs
_last_warnings: frozenset[str] = frozenset()  # the last compile's, not printed again


def configure_logging(log_format: str, level: int) -> None:
    """Everything at `level` and up to stderr; the QUIET_LIBRARIES at WARNING unless `level`
    is DEBUG (RECONCILER_DEBUG), which shows theirs too."""
    global _structured, _last_warnings
    _structured = log_format == "json"
    _last_warnings = frozenset()
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields=JSON_FIELDS,
                datefmt="%Y-%m-%dT%H:%M:%S%z",
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG
                                         else max(level, logging.WARNING))  # fmt: skip


def print_warnings(warnings: Iterable[object]) -> None:
    """Compile warnings, one a line on stderr: plain text for whoever runs the command, so
    stdout stays the command's output (YAML, a plan); with --log-format json, log records
    like every other line, so a collector never meets a line that is not JSON.

    The daemon compiles its revision again at each resync: the warnings the last compile
    printed are not printed again (at DEBUG only), so an idle daemon stays quiet."""
    global _last_warnings
    warnings = tuple(warnings)
    said, _last_warnings = _last_warnings, frozenset(str(w) for w in warnings)
    for warning in warnings:
        if str(warning) in said:
            logging.getLogger("reconciler.compile").debug("%s", warning)
        elif _structured:
            logging.getLogger("reconciler.compile").warning("%s", warning)
        else:
            print(warning, file=sys.stderr)
