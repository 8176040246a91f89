"""slurmConfig.slurmd.suspendTime and its timeouts, parsed: whether nodes power down, and
after how long (Slurm's SuspendTime, SuspendTimeout, ResumeTimeout). Read once per loaded
config (`Config.view.power`); the compiler renders it and the scheduler acts on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.errors import CompileError

# Slurm's words for "never": SuspendTime=INFINITE (or -1; NONE before 21.08).
_NEVER = {"INFINITE", "-1", "NONE"}
DEFAULT_SUSPEND_TIMEOUT = 30  # Slurm's defaults
DEFAULT_RESUME_TIMEOUT = 60


@dataclass(frozen=True)
class PowerSaving:
    suspend_time: int
    suspend_timeout: int
    resume_timeout: int


def power_saving(values: dict[str, Any]) -> PowerSaving | None:
    """None when nodes never power down (suspendTime unset or INFINITE)."""
    slurmd = (values.get("slurmConfig") or {}).get("slurmd") or {}
    raw = slurmd.get("suspendTime")
    if raw is None or str(raw).strip().upper() in _NEVER:
        return None
    seconds = _seconds(raw, "slurmConfig.slurmd.suspendTime")
    return PowerSaving(
        suspend_time=seconds,
        suspend_timeout=_seconds(slurmd.get("suspendTimeout", DEFAULT_SUSPEND_TIMEOUT),
                                 "slurmConfig.slurmd.suspendTimeout"),
        resume_timeout=_seconds(slurmd.get("resumeTimeout", DEFAULT_RESUME_TIMEOUT),
                                "slurmConfig.slurmd.resumeTimeout"),
    )  # fmt: skip


def _seconds(raw: Any, key: str) -> int:
    text = str(raw).strip()
    if isinstance(raw, bool) or not text.isascii() or not text.isdigit() or int(text) < 1:
        raise CompileError(
            f"{key}: {raw!r} is not a number of seconds",
            hint="write a whole number of seconds (e.g. 600), or INFINITE to never power down"
            if key.endswith("suspendTime")
            else "write a whole number of seconds of at least 1",
        )
    return int(text)
