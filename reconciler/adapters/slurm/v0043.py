"""slurmrestd data parsers v0.0.43 and v0.0.44 (Slurm 25.05 to 26.05; 25.11 serves v0.0.41 to
v0.0.44, 26.05 serves v0.0.42 to v0.0.45): wire format <-> the plain data of model.py.

Written from the OpenAPI documents Slurm 26.05.3's slurmrestd publishes for v0.0.42 to v0.0.45
(tests/unit/slurm_openapi/), diffed against v0.0.42 for every path, body and field the codec
reads or writes. Everything it reads is where v0.0.42 has it, so the decoders are v0040.py's;
what changed around it:
- v0.0.43 adds to jobs `segment_size`, `licenses_allocated`, `std{in,out,err}_expanded`; to
  nodes `topology`, `cert_flags`, `tls_cert_last_renewal`; to partitions `topology`; to a node
  update `topology_str`; the job flag EXTERNAL_JOB. None is read or written here.
- v0.0.44 adds the job state flag EXPEDITING (a requeued job whose requeue is expedited: Slurm's
  job_state_string() names it after CONFIGURING, so v0040.JOB_FLAG_STATES does too); the node
  state flags BLOCKED (blocked by an exclusive topology segment) and EXTERNAL (no slurmd), both
  flags beside a base state, as node_from_wire reads them; `step_id` and `submit_line` on jobs;
  reservation flags such as FORCE_START and REPLACE_DOWN; drops memory binding SORT.
- Paths, query parameters (`update_time`, `signal`), the `errors`/`warnings` entries
  (`error_number`, `error`, `description`, `source`), `meta.slurm.release`, the sharing modes
  (`shared`: none, oversubscribe, user, mcs, topo) and `GET /jobs/state/`'s entries (`job_id`
  string, `state` list; the document names the whole job schema for that path, as it does on
  v0.0.42: Slurm's parser dumps only those two) are v0.0.42's.
- Every version's document types the integers with NO_VAL/INFINITE (`time_limit`, `priority`,
  `memory_per_node`, a node's `weight`) as `{"set", "infinite", "number"}` objects only. Slurm's
  parser also takes a plain integer, which v0040.py sends (tested on 24.11.5); these versions
  send the documented object, so every body they write validates against their own document.
What none of the documents says, and only a running slurmrestd shows: an unknown job's 404/2017,
an unknown node's 200 with "Failure to query node", an unchanged job list's `last_update` 0.
These are taken to be as on v0.0.42 (the integration tests run them where a 25.11 or 26.05
slurmrestd serves these versions).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.adapters.slurm import v0040
from reconciler.adapters.slurm.codec import Codec
from reconciler.adapters.slurm.model import JobSpec, JobUpdate, NodeUpdate

VERSIONS = ("v0.0.44", "v0.0.43")
# Wire keys typed `*_no_val_struct` in the request schemas of the fields written here.
NO_VAL_KEYS = frozenset({"time_limit", "priority", "memory_per_node", "weight"})


def no_val(value: int) -> dict[str, Any]:
    """An integer in the documented spelling of a NO_VAL field."""
    return {"set": True, "infinite": False, "number": value}


def _documented(wire: dict[str, Any]) -> dict[str, Any]:
    return {
        key: no_val(value) if key in NO_VAL_KEYS and isinstance(value, int) else value
        for key, value in wire.items()
    }


def submission_to_wire(spec: JobSpec) -> dict[str, Any]:
    """v0040's body (and its refusals), with NO_VAL integers as objects."""
    body = v0040.submission_to_wire(spec)
    return {**body, "job": _documented(body["job"])}


def update_to_wire(update: JobUpdate) -> dict[str, Any]:
    return _documented(v0040.update_to_wire(update))


def node_update_to_wire(update: NodeUpdate) -> dict[str, Any]:
    return _documented(v0040.node_update_to_wire(update))


def codec(version: str) -> Codec:
    return replace(
        v0040.codec(version),
        submission=submission_to_wire,
        job_update=update_to_wire,
        node_update=node_update_to_wire,
    )


CODECS = tuple(codec(version) for version in VERSIONS)
