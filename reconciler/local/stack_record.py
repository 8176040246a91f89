"""A local stack's runtime directory and its record there, state.json: what `up` chose (ports,
paths, the Slurm release), how long each daemon took, and the foreground `up` process; what a
later process (`status`, `down`) needs to find the stack again. No secrets are ever stored there.

Plain data on disk; starting and stopping the stack is in stack.py.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from reconciler.errors import LocalStackError
from reconciler.local.processes import PidRecord, process_argv, process_start_ticks

STATE_FILE = "state.json"
STATE_VERSION = 1
APP_DIR = "sunk-reconciler"


def default_runtime_dir(name: str = "default") -> Path:
    """<system temp dir>/sunk-reconciler/<name>.

    Not $XDG_RUNTIME_DIR: for root that is /run/user/0, mode 700, where slurmrestd (which
    runs as sunk-slurmrestd) cannot read slurm.conf.
    """
    return Path(tempfile.gettempdir()) / APP_DIR / name


def new_temp_runtime_dir(prefix: str = "sunk-reconciler-") -> Path:
    """A fresh runtime dir under the system temp dir, readable by slurmrestd's user."""
    runtime = Path(tempfile.mkdtemp(prefix=prefix))
    runtime.chmod(0o755)  # mkdtemp makes it 0700
    return runtime


class StackRecord:
    """state.json of one runtime directory, held in memory (`data`) and written by `save`."""

    def __init__(self, runtime_dir: Path, cluster_name: str) -> None:
        self.runtime_dir = runtime_dir
        self.data: dict[str, object] = self._load(cluster_name)

    @staticmethod
    def recorded_cluster_name(runtime_dir: Path) -> str:
        """The cluster name a stack brought up earlier recorded; an error if there is none."""
        state_file = Path(runtime_dir) / STATE_FILE
        if not state_file.exists():
            raise LocalStackError(
                f"no local stack in {runtime_dir} (no {STATE_FILE})",
                hint="start one with `reconciler local up`",
            )
        state = json.loads(state_file.read_text())
        return str(state.get("cluster_name", "local"))

    @property
    def file(self) -> Path:
        return self.runtime_dir / STATE_FILE

    def _load(self, cluster_name: str) -> dict[str, object]:
        try:
            return json.loads(self.file.read_text())
        except FileNotFoundError:
            return {"version": STATE_VERSION, "cluster_name": cluster_name}

    def save(self) -> None:
        self.runtime_dir.mkdir(parents=True, exist_ok=True)
        self.data["runtime_dir"] = str(self.runtime_dir)
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.file)

    def copy(self) -> dict[str, object]:
        return json.loads(json.dumps(self.data))

    def section(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        return value if isinstance(value, dict) else None

    def taken_ports(self, *keys: str) -> set[int]:
        """The ports recorded for `keys` (default: every half of the stack)."""
        taken: set[int] = set()
        for key in keys or ("kube", "slurm"):
            section = self.section(key)
            if section is not None:
                taken |= set(_port_values(section["ports"]))
        return taken

    def record_timings(self, key: str, timings: dict[str, float]) -> None:
        all_timings = self.data.setdefault("timings", {})
        assert isinstance(all_timings, dict)
        all_timings[key] = {name: round(seconds, 3) for name, seconds in timings.items()}
        self.data["up"] = True
        self.save()

    def record_foreground(self, pid: int) -> None:
        argv = process_argv(pid) or [""]
        self.data["foreground"] = {
            "pid": pid,
            "argv0": argv[0],
            "start_ticks": process_start_ticks(pid) or 0,
        }
        self.save()

    def foreground(self) -> PidRecord | None:
        """The recorded foreground `up` process (which may have exited since)."""
        section = self.section("foreground")
        if section is None:
            return None
        return PidRecord("up", int(section["pid"]), str(section["argv0"]),
                         int(section["start_ticks"]))  # fmt: skip

    def forget_foreground(self) -> None:
        self.data.pop("foreground", None)
        self.save()


def _port_values(ports: object) -> list[int]:
    if isinstance(ports, dict):
        return [v for value in ports.values() for v in _port_values(value)]
    return [ports] if isinstance(ports, int) else []
