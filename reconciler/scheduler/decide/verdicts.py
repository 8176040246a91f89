"""Which of Slurm's answers to a submit are a verdict on the job itself. Pure.

A verdict refuses the Pod until it changes (its annotations, its requests): submitting it again
as it is would get the same answer. Anything else is retried: a slurmctld restarting (which
apply itself does) answers with socket timeouts (5004), connection errors (1001, 1800), "in
standby" (2027) or no number at all for a while, and a Pod refused for that would wait for an
edit that nobody makes. So this is a list of verdicts, and an error not on it is not one.

The numbers and names are Slurm's own (slurm_errno.h of Slurm 24.11; Slurm only appends to the
table, so those 22.05 has mean the same there). Some that sound like verdicts are left off on
purpose: 2002 (access denied: the operator's token lacks a right, not the Pod's fault), 2050
and 2074 (accounting and QOS limits, which free up), 2070 and 2101 (a partition that is not up
now), 2105 (submissions disabled for a while), 2049 (a restart is pending).
"""

from __future__ import annotations

from collections.abc import Mapping

VERDICTS: Mapping[int, str] = {
    2000: "ESLURM_INVALID_PARTITION_NAME",
    2001: "ESLURM_DEFAULT_PARTITION_NOT_SET",
    2003: "ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP",
    2004: "ESLURM_REQUESTED_NODES_NOT_IN_PARTITION",
    2005: "ESLURM_TOO_MANY_REQUESTED_CPUS",
    2006: "ESLURM_INVALID_NODE_COUNT",
    2012: "ESLURM_PATHNAME_TOO_LONG",
    2014: "ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE",
    2015: "ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE",
    2023: "ESLURM_BAD_DIST",
    2025: "ESLURM_BAD_TASK_COUNT",
    2029: "ESLURM_INVALID_FEATURE",
    2044: "ESLURM_INVALID_TASK_MEMORY",
    2045: "ESLURM_INVALID_ACCOUNT",
    2048: "ESLURM_INVALID_LICENSES",
    2051: "ESLURM_INVALID_TIME_LIMIT",
    2052: "ESLURM_RESERVATION_ACCESS",
    2053: "ESLURM_RESERVATION_INVALID",
    2054: "ESLURM_INVALID_TIME_VALUE",
    2057: "ESLURM_INVALID_WCKEY",
    2063: "ESLURM_MISSING_WORK_DIR",
    2066: "ESLURM_INVALID_QOS",
    2069: "ESLURM_INVALID_CPU_COUNT",
    2072: "ESLURM_INVALID_GRES",
    2099: "ESLURM_INVALID_MCS_LABEL",
    2102: "ESLURM_DUPLICATE_GRES",
    2111: "ESLURM_INVALID_CORE_CNT",
    2114: "ESLURM_BATCH_CONSTRAINT",
    2115: "ESLURM_INVALID_TRES",
    2119: "ESLURM_INVALID_GRES_TYPE",
    2122: "ESLURM_UNSUPPORTED_GRES",
    2123: "ESLURM_INVALID_NICE",
    2124: "ESLURM_INVALID_TIME_MIN_LIMIT",
    2129: "ESLURM_RESERVATION_USER_GROUP",
    2130: "ESLURM_PARTITION_ASSOC",
    2132: "ESLURM_BAD_THREAD_PER_CORE",
    2133: "ESLURM_INVALID_PREFER",
    2134: "ESLURM_INSUFFICIENT_GRES",
    2163: "ESLURM_GROUP_ID_INVALID",
    2164: "ESLURM_GROUP_ID_UNKNOWN",
    2165: "ESLURM_USER_ID_INVALID",
    2166: "ESLURM_USER_ID_UNKNOWN",
    2167: "ESLURM_INVALID_ASSOC",
    2170: "ESLURM_INVALID_RELATIVE_QOS",
    2171: "ESLURM_INVALID_EXTRA",
    2174: "ESLURM_RES_CORES_PER_GPU_UNIQUE",
    2175: "ESLURM_RES_CORES_PER_GPU_TOPO",
    2176: "ESLURM_RES_CORES_PER_GPU_NO",
    2178: "ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE",
    8000: "ESLURM_MISSING_TIME_LIMIT",
}
# ESLURM_INVALID_NODE_NAME: a verdict when the Pod names nodes (required/excluded-nodes). The
# nodes the scheduler excludes itself come from Kubernetes, which can still show a slurmd Pod
# of a node Slurm just dropped: then it is ours to retry.
INVALID_NODE_NAME = 2018


def is_verdict(error_number: int | None, *, pod_names_nodes: bool) -> bool:
    """Whether a submit refused with `error_number` refuses the Pod until it changes."""
    if error_number == INVALID_NODE_NAME:
        return pod_names_nodes
    return error_number in VERDICTS
