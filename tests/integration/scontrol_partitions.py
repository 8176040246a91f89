"""Partitions made and removed with scontrol, for the tests: the reconciler never does this
(slurm.conf owns partitions, and `scontrol reconfigure` drops any scontrol made), but it checks
that the partition arguments scontrol_args builds are ones slurmctld accepts."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.scontrol_args import OptionValue, partition_args
from reconciler.errors import ScontrolError

MISSING_PARTITION = "Invalid partition name specified"


def create_partition(scontrol: Scontrol, name: str, options: Mapping[str, OptionValue]) -> None:
    scontrol.run(partition_args("create", name, options))


def update_partition(scontrol: Scontrol, name: str, options: Mapping[str, OptionValue]) -> None:
    scontrol.run(partition_args("update", name, options))


def delete_partition(scontrol: Scontrol, name: str, *, missing_ok: bool = False) -> bool:
    """True when deleted; False when it did not exist and missing_ok."""
    try:
        scontrol.run(partition_args("delete", name, {}))
    except ScontrolError as error:
        if missing_ok and MISSING_PARTITION in error.output:
            return False
        raise
    return True
