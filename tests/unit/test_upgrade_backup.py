"""The backup before an upgrade: StateSaveLocation copied aside, never over an earlier one."""

from __future__ import annotations

from pathlib import Path

from reconciler.apply.upgrade_effects import FileBackup


def test_each_backup_is_a_new_directory_even_in_the_same_second(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(b"jobs")
    backup = FileBackup(state, tmp_path / "backups")
    said: list[str] = []
    first = Path(backup.take("24.11.5-to-25.11.7", said.append))
    (state / "job_state").write_bytes(b"jobs, later")
    second = Path(backup.take("24.11.5-to-25.11.7", said.append))
    assert first != second
    assert (first / "StateSaveLocation" / "job_state").read_bytes() == b"jobs"
    assert (second / "StateSaveLocation" / "job_state").read_bytes() == b"jobs, later"
    assert said == [f"backed up StateSaveLocation to {where}" for where in (first, second)]
