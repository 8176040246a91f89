"""The daemon's status, in a ConfigMap anyone can read (`reconciler status`, kubectl):
the revision it last tried, how that went, and the revision the cluster holds.

The ConfigMap carries our managed-by label but not the release label, so plans never see it
as a release object to prune. Anyone who may read it is not meant to read credentials: any URL
in it (the origin, an error quoting a remote) is written redacted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_wire import Obj
from reconciler.sources.redact import redacted_text

STATUS_SUFFIX = "-reconciler-status"


@dataclass(frozen=True)
class Status:
    revision: str = ""  # the revision last tried
    origin: str = ""
    state: str = ""  # applied | unchanged | failed
    summary: str = ""  # "1 added, 2 changed, 0 destroyed"
    error: str = ""
    attempted_at: str = ""
    applied_revision: str = ""  # what the cluster holds: the last revision applied or unchanged
    applied_at: str = ""
    applied_origin: str = ""  # the source it came from: a git head must descend from it
    drift_corrected: str = "0"  # resyncs that found and reverted changes made by hand
    # Every spec.schedulerName the daemon's Pod scheduler answers to, its own first ("" when
    # it runs none yet).
    scheduler_names: str = ""
    # A Slurm upgrade: its record (plan/upgrade_run.py's, as JSON: the stages, the one reached,
    # the backup, a failed check), so a restarted daemon resumes there; and its last step, in
    # words ("upgrade stage 2/4 (slurmctld): waiting: ...").
    upgrade: str = ""
    upgrade_step: str = ""

    def as_data(self) -> dict[str, str]:
        return {_camel(k): redacted_text(str(v)) for k, v in asdict(self).items()}

    @classmethod
    def from_data(cls, data: Mapping[str, str]) -> Status:
        return cls(**{f.name: str(data.get(_camel(f.name), "")) for f in fields(cls)})


def status_name(release: str) -> str:
    return f"{release}{STATUS_SUFFIX}"


def write_status(kube: Kube, namespace: str, release: str, status: Status) -> Obj:
    """The status ConfigMap as stored (its uid is what Events about it name)."""
    return kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": status_name(release), "namespace": namespace,
                      "labels": {wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE,
                                 wk.LABEL_COMPONENT: "status"}},
         "data": status.as_data()},
        force=True,
    )  # fmt: skip


def read_status(kube: Kube, namespace: str, release: str) -> Status | None:
    found: Any = kube.get("v1", "ConfigMap", status_name(release), namespace)
    return Status.from_data(found.get("data") or {}) if found else None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


EVENT_MESSAGE_LIMIT = 1024  # kubectl describe shows an Event's message whole: keep it readable


def revision_event(status: Status, denied: bool) -> tuple[str, str, str]:
    """(type, reason, message) of the Event a recorded revision makes: how a push went, where
    `kubectl get events` and `kubectl describe configmap` show it. Redacted as the status."""
    data = status.as_data()
    head = f"revision {data['revision']} from {data['origin']}"
    if status.state == "failed":
        reason = wk.EVENT_REVISION_DENIED if denied else wk.EVENT_REVISION_FAILED
        return "Warning", reason, f"{head}: {data['error']}"[:EVENT_MESSAGE_LIMIT]
    return "Normal", wk.EVENT_REVISION_APPLIED, f"{head}: {data['summary']}"[:EVENT_MESSAGE_LIMIT]
