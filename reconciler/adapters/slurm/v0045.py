"""slurmrestd data parser v0.0.45 (Slurm 26.05, which serves v0.0.42 to v0.0.45): wire format
<-> the plain data of model.py.

v0.0.44's codec (v0043.py) with one difference in what it reads, from the OpenAPI document
Slurm 26.05.3's slurmrestd publishes (tests/unit/slurm_openapi/):
- partitions report again what v0.0.40 to v0.0.44 left out (Slurm's FIXME): `flags` (DEFAULT,
  HIDDEN, ROOT_ONLY, ...), `preempt_mode` (a list: REQUEUE, CANCEL, SUSPEND, ...) and
  `partition/exclusive` (NO, NODE, USER or TOPO, as scontrol shows Exclusive=), so
  `is_default` and `preempt_mode` are true here; USER and TOPO read as the flags
  EXCLUSIVE_USER and EXCLUSIVE_TOPO (Slurm's PART_FLAG_ names, as v0.0.38 listed them).
Changed, and not read or written here:
- `GET /ping` drops the deprecated `pinged` ("UP") and `mode`; `status` (Slurm's error string
  of the ping) is new. codec.controller_responds reads `responding`, which every version has.
- removed: jobs' and nodes' `power`, nodes' `external_sensors` and `tres_weighted`,
  reservations' `watts`, diag's `parts_packed`, a submit's `power_flags` and the CPU binding
  flag CPU_BIND_RANK; `select_type` values are renamed to CR_* and partitions'
  `cpus/task_binding` becomes a list of flags.
- added: nodes' `suspend_time`, node state flags POWER_DOWN_ASAP and POWER_DOWN_FORCE, jobs'
  `container_type` and `memory_update_{delay,margin}`, a submit's `cores_per_socket`, the job
  flag JOB_IMPLICIT_MAX_NODES; paths for partitions and reservations to be created, requeue,
  `/new/node/`, `/conf` and `/resources/{job_id}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from reconciler.adapters.slurm import v0040, v0043
from reconciler.adapters.slurm.codec import Wire, text, upper_set, words
from reconciler.adapters.slurm.model import SlurmPartition

VERSION = "v0.0.45"
# `partition/exclusive` -> the partition flag Slurm keeps for it.
_EXCLUSIVE_FLAGS = {"USER": "EXCLUSIVE_USER", "TOPO": "EXCLUSIVE_TOPO"}


def partition_from_wire(d: Wire) -> SlurmPartition:
    """v0.0.40's nested partition, with the flags and preemption mode v0.0.45 reports."""
    section = d.get("partition")
    exclusive = text(section.get("exclusive")).upper() if isinstance(section, Mapping) else ""
    flags = upper_set(d.get("flags"))
    if exclusive in _EXCLUSIVE_FLAGS:
        flags |= {_EXCLUSIVE_FLAGS[exclusive]}
    return replace(
        v0040.partition_from_wire(d),
        is_default="DEFAULT" in flags,
        flags=flags,
        preempt_mode=tuple(mode.upper() for mode in words(d.get("preempt_mode"))),
    )


CODEC = replace(v0043.codec(VERSION), partition=partition_from_wire)
