"""Where logs go and in what shape: text for a terminal, one JSON object a line for a
collector (Loki, Elasticsearch, Cloud Logging), chosen with --log-format."""

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


_structured = False  # set by configure_logging: compile warnings then go through the logs


def configure_logging(log_format: str, level: int) -> None:
    global _structured
    _structured = log_format == "json"
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


def print_warnings(warnings: Iterable[object]) -> None:
    """Compile warnings, one a line on stderr: plain text for whoever runs the command, so
    stdout stays the command's output (YAML, a plan); with --log-format json, log records
    like every other line, so a collector never meets a line that is not JSON."""
    for warning in warnings:
        if _structured:
            logging.getLogger("reconciler.compile").warning("%s", warning)
        else:
            print(warning, file=sys.stderr)
