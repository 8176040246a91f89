"""The foreground `reconciler local up` process: the parent of the stack's daemons.

Only a parent can reap its children, so `down` from another process first asks the foreground
`up` to stop (it stops and reaps the daemons), then stops what is left by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from reconciler.local.processes import Supervisor, belongs_to
from reconciler.local.stack_record import StackRecord

FOREGROUND_STOP_SECONDS = 60.0


class ForegroundUp:
    def __init__(self, record: StackRecord, supervisor: Supervisor) -> None:
        self._record = record
        self._supervisor = supervisor

    def remember(self, pid: int) -> None:
        """Remember the foreground `up` process, so a later `down` can ask it to stop first."""
        self._record.record_foreground(pid)

    def pid(self) -> int | None:
        """The running foreground `up` process, if any (checked against its start time)."""
        record = self._record.foreground()
        return record.pid if record is not None and belongs_to(record) else None

    def stop(self, *, timeout: float = FOREGROUND_STOP_SECONDS) -> list[str]:
        """SIGTERM the recorded foreground `up` process and wait for it to exit.

        It is the daemons' parent: stopping them itself, it also reaps them (from here they would
        become zombies where PID 1 does not reap). Returns what went away, the `up` process first;
        whatever is still running afterwards is left to `down`.
        """
        record = self._record.foreground()
        if record is None or not belongs_to(record):
            return []
        supervisor = self._supervisor
        before = [name for name in supervisor.names() if supervisor.running(name)]
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while belongs_to(record) and time.monotonic() < deadline:
            time.sleep(0.1)
        if belongs_to(record):
            return []
        self._record.forget_foreground()
        gone = [name for name in before if supervisor.running(name) is None]
        return [f"up (pid {record.pid})", *gone]
