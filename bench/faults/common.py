"""The chaos benchmark's settings, and its progress lines."""

from __future__ import annotations

import re
from pathlib import Path

from bench.harness import report

ROOT = Path(__file__).resolve().parent.parent.parent
REPO = ROOT / "bench" / "fixtures" / "chaos-repo"
STACK_NAME = "bench-chaos"
NAMESPACE, POD_NAMESPACE, RELEASE = "slurm", "bench", "bench"
SCHEDULER = f"{NAMESPACE}-{RELEASE}-slurm-scheduler"
LEASE = f"{RELEASE}-reconciler"
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RECOVERY_TARGET = 10.0


def say(text: str) -> None:
    report.say(text, prefix="chaos", clock=True)
