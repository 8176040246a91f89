"""Node drain, resume, state and weight: through slurmrestd where it can (v0.0.40+, Slurm
23.11+), through scontrol otherwise (v0.0.38 has no node update endpoint).

Over REST the daemon needs neither munge nor a slurm.conf for these; the values are checked by
the same rules either way (scontrol_args.py's grammar), so a reason reads back as it was written and
nothing depends on which path was taken.
"""

from __future__ import annotations

from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.scontrol_args import NodeState, node_state_args, node_weight_args
from reconciler.adapters.slurm.model import CAN_UPDATE_NODES, NodeUpdate, SlurmRestApi
from reconciler.errors import SlurmUnsupportedError


class NodeControl:
    """What apply, node sync and bin-packing change on Slurm nodes, over the best path."""

    def __init__(self, rest: SlurmRestApi, scontrol: Scontrol | None) -> None:
        self._api = rest
        self._chosen: tuple[SlurmRestApi | None] | None = None  # the REST path, once asked
        self._scontrol = scontrol

    @property
    def _rest(self) -> SlurmRestApi | None:
        """slurmrestd if it updates nodes, chosen on first use rather than at construction: the
        daemon starts before slurmrestd may answer (its Pod is ours to create), and a failed
        look is asked again next time."""
        if self._chosen is None:
            self._chosen = (self._api if CAN_UPDATE_NODES in self._api.capabilities else None,)
        return self._chosen[0]

    @property
    def path(self) -> str:
        """How changes travel, for messages: "slurmrestd v0.0.42", "scontrol" or "none"."""
        if (rest := self._rest) is not None:
            return f"slurmrestd {rest.api_version}"
        return "scontrol" if self._scontrol is not None else "none"

    @property
    def available(self) -> bool:
        return self._rest is not None or self._scontrol is not None

    def drain_node(self, nodes: str, reason: str) -> None:
        """DRAIN: running jobs finish, nothing new starts. The reason is kept verbatim."""
        self.set_node_state(nodes, NodeState.DRAIN, reason)

    def resume_node(self, nodes: str) -> None:
        self.set_node_state(nodes, NodeState.RESUME)

    def set_node_state(self, nodes: str, state: NodeState, reason: str | None = None) -> None:
        args = node_state_args(nodes, state, reason)  # validates, whichever path is taken
        if (rest := self._rest) is not None:
            rest.update_node(nodes, NodeUpdate(state=NodeState(state).value, reason=reason))
        else:
            self._require_scontrol().run(args)

    def set_node_weight(self, nodes: str, weight: int) -> None:
        """Slurm allocates the lowest-weight nodes that fit first (before LLN or node order)."""
        args = node_weight_args(nodes, weight)
        if (rest := self._rest) is not None:
            rest.update_node(nodes, NodeUpdate(weight=weight))
        else:
            self._require_scontrol().run(args)

    def _require_scontrol(self) -> Scontrol:
        if self._scontrol is None:
            raise SlurmUnsupportedError(
                "cannot change Slurm nodes: slurmrestd has no node endpoint and no scontrol "
                "was given",
                hint="use a Slurm whose slurmrestd serves v0.0.40 or later, or run where "
                "scontrol reaches slurmctld (--slurm-conf)",
            )
        return self._scontrol
