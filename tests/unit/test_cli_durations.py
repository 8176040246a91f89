"""The scheduler's duration flags take what SUNK's scheduler takes: "Schedule Kubernetes Pods
with Slurm" runs it with `--slurm-kill-wait=30s` (a Go duration); a bare integer still means
seconds, as our flag always read it."""

from __future__ import annotations

import pytest

from reconciler.cli import build_parser
from reconciler.cli.schedule import scheduler_settings


def _kill_wait(value: str) -> int:
    args = build_parser().parse_args(["schedule", f"--slurm-kill-wait={value}"])
    return scheduler_settings(args).kill_wait_seconds


@pytest.mark.parametrize(
    ("written", "seconds"), [("30s", 30), ("2m", 120), ("1m30s", 90), ("1h", 3600), ("45", 45)]
)
def test_kill_wait_takes_sunks_durations_and_whole_seconds(written: str, seconds: int) -> None:
    assert _kill_wait(written) == seconds


@pytest.mark.parametrize("written", ["30x", "1.5s", "500ms", "-30s", "s", "30s2m", ""])
def test_kill_wait_refuses_other_words_naming_the_flag(
    written: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _kill_wait(written)
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "argument --slurm-kill-wait:" in error and "1m30s" in error, error
