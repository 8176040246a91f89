"""The record of a Slurm upgrade kept in the daemon's status ConfigMap (`upgrade`, and the last
step in words, `upgradeStep`), each step taken told as an Event on it, a stopped upgrade as a
Warning. `reconciler apply` keeps it there too, so the daemon and the command resume each
other's upgrade."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.daemon.status import EVENT_MESSAGE_LIMIT, Status, read_status, write_status
from reconciler.errors import ReconcilerError
from reconciler.plan.upgrade_run import APPLY_STAGE, BACK_UP, RESTORE, STOP, Step, UpgradeRecord

log = logging.getLogger(__name__)
_TOLD = (BACK_UP, APPLY_STAGE, RESTORE, STOP)


class StatusRecords:
    """`current` gives the status as its holder knows it, `keep` hands it the new one (the
    daemon's Converger writes the whole status after each convergence)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        release: str,
        current: Callable[[], Status],
        keep: Callable[[Status], None],
    ) -> None:
        self._kube, self._namespace, self._release = kube, namespace, release
        self._current, self._keep = current, keep

    @classmethod
    def of_command(cls, kube: Kube, namespace: str, release: str) -> StatusRecords:
        """For `reconciler apply`: the status as stored, kept here."""
        held = [read_status(kube, namespace, release) or Status()]

        def keep(status: Status) -> None:
            held[0] = status

        return cls(kube, namespace, release, lambda: held[0], keep)

    def read(self) -> UpgradeRecord | None:
        return UpgradeRecord.from_json(self._current().upgrade)

    def write(self, record: UpgradeRecord | None, step: Step) -> None:
        status = replace(self._current(), upgrade=record.to_json() if record else "",
                         upgrade_step=step.line())  # fmt: skip
        self._keep(status)
        try:
            stored = write_status(self._kube, self._namespace, self._release, status)
            if step.kind in _TOLD:
                stopped = step.kind == STOP
                self._kube.create_event(
                    stored, reason=wk.EVENT_UPGRADE_STOPPED if stopped else wk.EVENT_UPGRADE_STEP,
                    message=status.as_data()["upgradeStep"][:EVENT_MESSAGE_LIMIT],
                    action="Upgrade", type="Warning" if stopped else "Normal",
                    reporting_controller=wk.EVENT_REPORTER, reporting_instance=wk.EVENT_REPORTER,
                )  # fmt: skip
        except ReconcilerError as error:  # the upgrade goes on; the next write says it
            log.warning("upgrade: cannot write the status ConfigMap or its Event: %s", error)
