"""Bin-packing: Slurm's node weights for `scheduler.binPackPartitions`, the fullest nodes
lowest (packing_decide.py decides the weights), refreshed on a timer and after jobs start or end."""

from __future__ import annotations

import logging
import threading

from reconciler.errors import ReconcilerError
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide.packing_decide import (
    Fragmentation,
    fragmentation,
    packing_weights,
    weight_changes,
)
from reconciler.scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)

PACK_SECONDS = 5.0  # node weights are refreshed at least this often, and after every change


class Packer:
    def __init__(
        self, slurm: SlurmClients, settings: SchedulerSettings, stopping: threading.Event
    ) -> None:
        self._slurm = slurm
        self.settings = settings
        self._stopping = stopping
        self.repack = threading.Event()  # set when jobs started or ended
        self.fragmentation: Fragmentation | None = None  # of the bin-packed partitions

    def check(self) -> None:
        if not self._slurm.nodes.available:
            raise ReconcilerError(
                "scheduler.binPackPartitions needs to set node weights: slurmrestd "
                f"{self._slurm.operator.api_version} cannot, and no scontrol was given; run "
                "the scheduler where scontrol reaches slurmctld, or use Slurm 23.11 or later"
            )

    def pack_forever(self) -> None:
        while not self._stopping.is_set():
            self.repack.wait(PACK_SECONDS)
            self.repack.clear()
            if not self._stopping.is_set():
                try:
                    self.pack()
                except ReconcilerError as exc:
                    log.warning("scheduler: setting bin-packing node weights failed: %s", exc)

    def pack(self) -> None:
        """The fullest nodes of the bin-packed partitions get the lowest weights."""
        nodes = self._slurm.operator.nodes().items
        partitions = self.settings.bin_pack_partitions
        packed = [n for n in nodes if set(n.partitions) & set(partitions)]
        self.fragmentation = fragmentation(packed)
        for name, weight in weight_changes(nodes, packing_weights(nodes, partitions)).items():
            self._slurm.nodes.set_node_weight(name, weight)
