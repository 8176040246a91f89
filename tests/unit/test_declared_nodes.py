"""Which Slurm nodes are ours is recorded on the slurm.conf ConfigMap we
render, not read back from a `# Nodes:` comment that an extraConfig line can fake. A cluster
applied by an earlier version (no record yet) is read from its slurm.conf, where only the last
`# Nodes:` comment can be ours."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.apply.reservations import reservation_phases
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.plan.diff import desired_objects, needs_dry_run, plan_changes
from reconciler.plan.live import LiveNode, LiveState
from reconciler.plan.model import ObjectRef
from tests.unit.conftest import config_from
from tests.unit.test_reservations import T0, _maint

FAKE = """
slurmConfig:
  extraConfig: |
    # Nodes: (not really)
    PreemptMode=REQUEUE
"""
NODES = """
compute:
  nodes:
    cpu: {definitions: [cpu-epyc, las1], replicas: 1}
    gpu: {definitions: [rtx4000, las1], replicas: 2, maxReplicas: 3}
"""
CONF_MAP = ObjectRef("kubernetes", "ConfigMap", "slurm", "slurm-slurm-conf")
ANNOTATION = "reconciler.sunk.dev/slurm-nodes"


def _state(values: str) -> DesiredState:
    return compile_desired_state(config_from(values))


def _applied(values: str, *, legacy: bool = False, **fields: Any) -> LiveState:
    """The live state once `values` was applied; `legacy`: by a version that did not record
    its nodes on the ConfigMap. `fields` replace LiveState fields (reservations, now)."""
    state = _state(values)
    objects = copy.deepcopy(desired_objects(state))
    if legacy:
        objects[CONF_MAP]["metadata"].pop("annotations")
    kube = {r: o for r, o in objects.items() if r.scope == "kubernetes" and r.kind != "Secret"}
    nodes = {
        n.name: LiveNode(n.name, frozenset({"IDLE"}), None, n.cpus, n.real_memory_mb, n.gres,
                         n.features)
        for n in state.slurm_nodes
    }  # fmt: skip
    secrets = frozenset(s.name for s in state.secrets)
    return LiveState(kube, nodes, state.slurm_conf, state.gres_conf, secrets=secrets, **fields)


def test_the_slurm_conf_config_map_records_our_nodes() -> None:
    conf_map = desired_objects(_state(NODES))[CONF_MAP]
    assert conf_map["metadata"]["annotations"] == {
        ANNOTATION: "slurm-cpu-0,slurm-gpu-[0-2]"  # running and FUTURE spares
    }


def test_a_cluster_applied_before_the_record_is_read_from_its_slurm_conf() -> None:
    """The previous version's slurm.conf: our `# Nodes:` section is the last one (extraConfig
    is rendered before it), so the fake one in extraConfig is passed over."""
    live = _applied(FAKE + NODES, legacy=True)
    state = _state(FAKE + NODES.replace("gpu: {", "gpu: {enabled: false, "))
    view = {ref: desired_objects(state)[ref] for ref in needs_dry_run(state, live)}
    plan = plan_changes(state, live, server_view=view)
    gone = {c.ref.name for c in plan.changes if c.ref.kind == "Node"}
    assert gone == {"slurm-gpu-0", "slurm-gpu-1"} and plan.controller_restart
    # The first plan after the upgrade records the nodes on the ConfigMap.
    [conf_map] = [c for c in plan.changes if c.ref == CONF_MAP]
    assert ANNOTATION in conf_map.desired["metadata"]["annotations"]


def test_the_record_wins_over_the_slurm_conf_text() -> None:
    live = _applied(NODES)
    live.kube_objects[CONF_MAP]["metadata"]["annotations"][ANNOTATION] = "slurm-cpu-0"
    plan = plan_changes(_state(NODES), live)
    assert plan.controller_restart  # the gpu nodes are not declared in the live slurm.conf


def test_a_reservation_onto_a_new_spare_waits_for_it_despite_a_fake_comment() -> None:
    """A spare declared by this plan joins with the new slurm.conf: a reservation update
    that names it must run after, not before, the reconfigure."""
    resv = """
  reservations:
    maint:
      nodes: slurm-gpu-[0-{last}]
      startTime: 2030-01-01T08:00:00Z
      duration: 120
      users: [root]
      flags: [MAINT, IGNORE_JOBS]
"""
    before = FAKE + resv.format(last=2) + NODES
    after = FAKE + resv.format(last=3) + NODES.replace("maxReplicas: 3", "maxReplicas: 4")
    live_resv = _maint(nodes=("slurm-gpu-0", "slurm-gpu-1", "slurm-gpu-2"))
    live = _applied(before, reservations={live_resv.name: live_resv}, now=T0 - 86400)
    plan = plan_changes(_state(after), live)
    early, late = reservation_phases(plan)
    assert [s.change.ref.name for s in late] == ["slurm-maint"] and early == []
