"""Durations on the command line, as SUNK's scheduler takes them (the one parser).

SUNK's "Schedule Kubernetes Pods with Slurm" and "SUNK Pod Scheduler" pages run the scheduler
with `--slurm-kill-wait=30s`: a Go duration. A flag of ours that mirrors such an argument takes
the same words, and a bare integer, which these flags always read as seconds.
"""

from __future__ import annotations

import argparse
import re

# Go's ParseDuration words of whole seconds, in hours, minutes and seconds order: "30s", "2m",
# "1m30s", "1h". Each count is at most 9 digits, so int() reads a bounded string.
_DURATION = re.compile(r"(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?")
_SECONDS = re.compile(r"\d{1,9}")
_FORMS = "whole seconds (30) or a duration of h, m and s (30s, 2m, 1m30s)"


def duration_seconds(value: str) -> int:
    """An argparse type: `value` as whole seconds; argparse's error names the flag."""
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return int(text)
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a duration: write {_FORMS}")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds
