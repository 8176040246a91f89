"""The new slurm.conf reaching slurmctld: on the local stack (or wherever apply can see the
files) it waits until they are there, then reconfigures; under our controller Deployment the
controller Pod reconfigures itself once kubelet has delivered them; when NodeName lines change,
slurmctld is restarted and the nodes that stay are waited for."""

from __future__ import annotations

import time

from reconciler.apply.target import ApplyOptions, Say, Target
from reconciler.compile.topology import TOPOLOGY_FILES
from reconciler.plan.model import SLURM_CONFIG, STEP_REGISTER, Change, Plan


def update_slurm_config(plan: Plan, target: Target, options: ApplyOptions, say: Say) -> None:
    configs = {c.ref.name: c for c in plan.changes if c.ref.kind == SLURM_CONFIG}
    if not configs or plan.bootstrap:  # a slurmctld that starts reads the files as they are
        return
    slurm_conf, gres_conf = _texts(plan, configs)
    if target.sink is not None:
        # A topology file is waited for only when it is written (a key gone stays on disk there).
        topology = {n: c.after for n in TOPOLOGY_FILES if (c := configs.get(n)) and c.after}
        target.sink.wait_for(slurm_conf, gres_conf, options.config_timeout,
                             topology_files=topology)  # fmt: skip
    elif target.restarter is not None and not plan.controller_restart:
        # Our controller Pod rereads its mounted config itself once kubelet has updated the
        # files (its reconfigure sidecar): a reconfigure now could read the old ones.
        target.restarter.nudge()
        say("slurm.conf applied: the controller Pod reconfigures slurmctld once kubelet "
            "updates its files (within about a minute)")  # fmt: skip
        return
    if plan.controller_restart:
        assert target.restarter is not None  # checked before anything changed
        target.restarter.restart(options.config_timeout)
        say("restarted slurmctld (NodeName lines changed); waiting for nodes to report back")
        # Nodes this plan adds read UNKNOWN until their Pods start, and those Pods come only
        # with the StatefulSets applied after this step: waiting for them here always ran
        # into register_timeout (60 s). _wait_registered waits for them at the end.
        joining = {c.ref.name for c in plan.changes if STEP_REGISTER in c.steps}
        _wait_settled(target, options, joining)
    else:
        target.scontrol.reconfigure()
        say("slurmctld reconfigured")


def _wait_settled(target: Target, options: ApplyOptions, joining: set[str]) -> None:
    """After a restart nodes read UNKNOWN until their slurmd reports in (a few seconds)."""
    deadline = time.monotonic() + options.register_timeout
    while time.monotonic() < deadline:
        snapshot = target.slurm.nodes()
        if snapshot is not None and all(
            n.state != "UNKNOWN" for n in snapshot.items if n.name not in joining
        ):
            return
        time.sleep(options.poll)


def _texts(plan: Plan, configs: dict[str, Change]) -> tuple[str, str]:
    """The slurm.conf and gres.conf apply puts in place (unchanged ones as they are)."""
    texts = {}
    for name in ("slurm.conf", "gres.conf"):
        change = configs.get(name)
        texts[name] = change.after if change is not None else _unchanged(plan, name)
    return texts["slurm.conf"], texts["gres.conf"]


def _unchanged(plan: Plan, name: str) -> str:
    conf_map = next(
        (c.desired for c in plan.changes if c.ref.kind == "ConfigMap" and c.desired
         and name in (c.desired.get("data") or {})),
        None,
    )  # fmt: skip
    return conf_map["data"][name] if conf_map else ""
