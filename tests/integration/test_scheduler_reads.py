"""How the scheduler reads Slurm at load (a whole job list is what loads slurmctld), on the
real local stack: after its start, a burst of Pods is bound and torn down without one read of
Slurm's whole job list (the polls and the start watch ask `GET /jobs/state/` and read our moved
jobs one by one), and every bound Pod's stage times come out of the scheduler, in order.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from reconciler.scheduler.counters import WHOLE_LIST_READS, whole_list_reads
from reconciler.scheduler.stages import STAGES, PodStages, stage_table
from tests.integration.helpers import unique, wait_for
from tests.integration.test_scheduler import (
    NAMESPACE,
    ON_SLURM_2205,
    Env,
    _create,
    _live_placeholders,
    _pod,
    _pod_spec,
    scheduler_env,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(ON_SLURM_2205, reason="slurmrestd 22.05 has no GET /jobs/state/"),
]

BURST = 20
# 2 GPU nodes and 4 CPU nodes of 4 CPUs each (local-size): 24 CPUs, so all 20 Pods run at once.
SIX_NODES = """
compute:
  nodes:
    cpu:
      replicas: 4
      maxReplicas: 4
"""


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    yield from scheduler_env(SIX_NODES, "reads", "scheduler reads tests", stack_timings)


def _whole_lists(env: Env) -> dict[str, int]:
    requests = env.scheduler.counters.slurm_requests
    return {op: n for op, n in requests.items() if op in WHOLE_LIST_READS}


def test_a_burst_is_bound_and_torn_down_without_a_whole_list_read(
    env: Env, pods: list[str]
) -> None:
    records: list[PodStages] = []
    lock = threading.Lock()

    def keep(record: PodStages) -> None:
        with lock:
            records.append(record)

    env.scheduler.observe(stages=keep)
    counters = env.scheduler.counters
    at_start = _whole_lists(env)
    assert whole_list_reads(at_start) >= 1, "the start reads the list once (our jobs in it)"
    polls = counters.polls
    prefix = unique("burst")
    for i in range(BURST):
        _create(env, pods, _pod_spec(f"{prefix}-{i}", cpu="100m", memory="100Mi"))

    def all_bound() -> bool:
        found = [_pod(env, name) for name in pods]
        return all(p is not None and p["spec"].get("nodeName") for p in found)

    wait_for(all_bound, 90, f"{BURST} Pods to be bound")
    # The safety-net poll runs every 2 s here: let it look at the running jobs twice.
    wait_for(lambda: counters.polls >= polls + 2, 30, "two polls after the burst")
    for name in pods:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    wait_for(lambda: not _live_placeholders(env), 60, "the burst's jobs to end")
    polls = counters.polls
    wait_for(lambda: counters.polls >= polls + 2, 30, "two polls after the teardown")

    requests = dict(counters.slurm_requests)
    assert _whole_lists(env) == at_start, requests
    assert requests.get("job_states", 0) >= 2, requests  # the polls' look
    assert requests.get("job", 0) >= BURST, requests  # each started job read back, alone

    with lock:
        bound = list(records)
    assert len(bound) == BURST
    for record in bound:
        marked = [s for s in STAGES if s in record.times]
        assert marked == list(STAGES), (record.uid, dict(record.times))
        assert record.times["seen"] <= record.times["admitted"] <= record.times["submitted"]
        assert record.times["submitted"] <= record.times["seen allocated"]
        assert record.times["seen allocated"] <= record.times["bound"]
    rows = stage_table(bound)
    assert [r.label for r in rows] == [f"{a} -> {b}" for a, b in itertools.pairwise(STAGES)]
    assert all(r.count == BURST and 0 <= r.p50 <= r.p99 for r in rows)
